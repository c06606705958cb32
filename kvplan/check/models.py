"""Repository names the Hugging Face Hub renamed, read as the bundled spec of the repository they became (the Hub
redirects the old name to the new one, so a manifest written before the rename serves the same model)."""

from __future__ import annotations

import re

# old name -> the repository it became (source: each repository's page on huggingface.co, which redirects)
RENAMED = {
    "gpt2": "openai-community/gpt2",  # the un-namespaced GPT-2 moved under openai-community (2024)
}
# Meta dropped the "Meta-" prefix of its Llama 3.1+ repositories (Dec 2024): Meta-Llama-3.1-8B is Llama-3.1-8B
DROPPED_PREFIX = re.compile(r"^(meta-llama/)Meta-(Llama-3\.[1-9].*)$", re.IGNORECASE)


def successor(model: str) -> str | None:
    """The bundled id an old repository name now is, or None."""
    from kvplan.models.sources import find_spec_file

    if find_spec_file(model) is not None:
        return None
    wanted = RENAMED.get(model) or next((new for old, new in RENAMED.items() if old.lower() == model.lower()), None)
    match = DROPPED_PREFIX.match(model)
    if wanted is None and match:
        wanted = match.group(1) + match.group(2)
    spec = find_spec_file(wanted) if wanted else None
    return spec.id if spec is not None else None
