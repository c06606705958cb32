"""The Hugging Face Hub source: config.json through huggingface_hub, so that revision, token, cache,
HF_HUB_OFFLINE and HF_ENDPOINT behave as they do for every other Hub tool."""

from __future__ import annotations

import json
import os
from pathlib import Path

from huggingface_hub import constants, get_safetensors_metadata, hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import disable_progress_bars
from huggingface_hub.utils import logging as hf_logging

from kvplan.errors import KvplanError
from kvplan.models.model import SpecSource

OFFLINE_HINT = "use a bundled id (kvplan models list) or a local config.json path"


def cached_config(repo_id: str, revision: str | None) -> Path | None:
    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return Path(found) if isinstance(found, str) else None


def download_config(repo_id: str, revision: str | None, token: str | None,
                    suggestions: list[str]) -> tuple[Path, SpecSource]:
    where = repo_id if revision is None else f"{repo_id}@{revision}"
    if "/" not in repo_id or repo_id.count("/") > 1:
        hint = f"; bundled ids like it: {', '.join(suggestions)}" if suggestions else ""
        raise KvplanError(f"not a bundled id, a local path, or a Hub repo id (org/name){hint}", where)
    if constants.HF_HUB_OFFLINE:
        cached = cached_config(repo_id, revision)
        if cached is None:
            raise KvplanError(f"HF_HUB_OFFLINE is set and config.json is not in the Hugging Face cache; "
                              f"{OFFLINE_HINT}", where)
        return cached, SpecSource("hub-cache", str(cached), revision)
    hf_logging.set_verbosity_error()  # its retry warnings would break the one-line error contract
    disable_progress_bars()
    try:
        path = hf_hub_download(repo_id, "config.json", revision=revision, token=token)
    except GatedRepoError:
        raise KvplanError("the repo is gated: accept its licence on the Hub, then log in (hf auth login) or "
                          "pass --token; or give a local config.json path", where) from None
    except RevisionNotFoundError:
        raise KvplanError(f"revision {revision!r} not found; check the branch, tag or commit", where) from None
    except RepositoryNotFoundError:
        hint = f" Bundled ids like it: {', '.join(suggestions)}." if suggestions else ""
        raise KvplanError("repo not found, or private (401/404): check the id, log in (hf auth login) or pass "
                          f"--token, or give a local config.json path.{hint}", where) from None
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: the network failed, not the repo
        raise KvplanError(f"the Hub ({constants.ENDPOINT}) is unreachable and config.json is not cached; "
                          f"{OFFLINE_HINT}", where) from None
    except EntryNotFoundError:
        raise KvplanError("the repo has no config.json; pass a local config.json path", where) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        if status in (401, 403):
            raise KvplanError(f"access denied ({status}): log in (hf auth login) or pass --token, or give a "
                              "local config.json path", where) from None
        raise KvplanError(f"the Hub answered {status}; {OFFLINE_HINT}", where) from None
    except OSError as exc:
        raise KvplanError(f"cannot fetch config.json ({exc}); {OFFLINE_HINT}", where) from None
    return Path(path), SpecSource("hub", f"{constants.ENDPOINT}/{repo_id}", revision)


# Bytes per element of each safetensors dtype; MXFP4 and packed int4 are stored as U8 / I32 elements.
SAFETENSORS_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
                     "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvplan" / "safetensors"


def stored_weight_bytes(repo_id: str, revision: str | None, token: str | None) -> int | None:
    """Bytes of the checkpoint's tensors as stored, from the safetensors headers (cached per repo and revision).
    None when the repo has no safetensors or the Hub cannot say."""
    cached = cache_dir() / f"{repo_id.replace('/', '__')}@{revision or 'main'}.json"
    try:
        counts = json.loads(cached.read_text())
    except (OSError, ValueError):  # not cached yet, or an unreadable cache file
        counts = None
    if counts is None:
        if constants.HF_HUB_OFFLINE:
            return None
        try:
            counts = get_safetensors_metadata(repo_id, revision=revision, token=token).parameter_count
        except Exception:  # any Hub or parsing failure: fall back to the config-derived estimate
            return None
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(counts))
        except OSError:
            pass
    if not isinstance(counts, dict) or any(d not in SAFETENSORS_BYTES for d in counts):
        return None
    return sum(int(n) * SAFETENSORS_BYTES[d] for d, n in counts.items())
