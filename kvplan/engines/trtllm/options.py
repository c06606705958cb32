"""trtllm-serve's --config / --extra_llm_api_options file: a YAML mapping of LLM-API arguments, with nested
sections such as kv_cache_config. Each key, named with dots (kv_cache_config.max_tokens), is mapped onto
kvplan's knobs through the catalogue in flags.py, noted when it changes memory in a way kvplan does not model,
listed when it does not change memory, and refused when TensorRT-LLM would refuse it too (its argument models
forbid unknown fields). Every value keeps 'file:line: key' as its origin."""

from __future__ import annotations

from typing import Any

from kvplan.deployment.config_file import ExpansionError, KeyPath, load_located, read_text
from kvplan.deployment.declaration import BY_NAME
from kvplan.deployment.flags import INERT_NOTE
from kvplan.deployment.values import Draft, did_you_mean
from kvplan.engines.trtllm import flags as catalogue
from kvplan.errors import KvplanError, LocatedError
from kvplan.units import GiB

HOST_CACHE_MAXIMUM = 2**20 * GiB


def read_options(path: str) -> Draft:
    """The file as a Draft (lowest layer under the trtllm-serve flags)."""
    text = read_text(path)
    try:
        documents = load_located(text, path)
    except LocatedError as exc:
        raise KvplanError(exc.message, f"{path}:{exc.line}") from None
    except ExpansionError as exc:
        raise KvplanError(exc.message, f"{path}:{exc.node_line}") from None
    if len(documents) > 1:
        raise KvplanError(f"expected one YAML document, found {len(documents)}", path)
    draft = Draft()
    if not documents or documents[0][0] is None:
        draft.notes.append(f"{path} is empty: no LLM-API options (as TensorRT-LLM reads it)")
        return draft
    mapping, lines = documents[0]
    if not isinstance(mapping, dict):
        raise KvplanError(f"expected a mapping of LLM-API options (max_batch_size:, kv_cache_config:, ...), got "
                          f"{type(mapping).__name__}", f"{path}:{_first_content_line(text)}")
    inert: list[str] = []
    _read_section(mapping, (), lines, path, draft, inert)
    if inert:
        draft.notes.append(f"{path}: {INERT_NOTE}{', '.join(inert)}")
    return draft


def _read_section(mapping: dict[Any, Any], prefix: KeyPath, lines: dict[KeyPath, int], path: str, draft: Draft,
                  inert: list[str]) -> None:
    for key, value in mapping.items():
        key_path = (*prefix, str(key))
        dotted = ".".join(key_path)
        origin = f"{path}:{lines.get(key_path, '?')}: {dotted}"
        if dotted in catalogue.EXTRA_OPTIONS_SECTIONS:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise KvplanError(f"expected a mapping of {dotted} fields, got {type(value).__name__}", origin)
            _read_section(value, key_path, lines, path, draft, inert)
        elif dotted == catalogue.ATTENTION_DP_KEY:
            if value is not None and not isinstance(value, bool):
                raise KvplanError(f"expected true or false, got {value!r:.40}", origin)
            if value is True:  # every rank of the TP group its own attention DP rank (dialect.attention_dp_words)
                tp = mapping.get("tensor_parallel_size")
                draft.set("attention_data_parallel_size", tp if isinstance(tp, int) and tp > 0 else 1, origin)
        elif dotted in catalogue.EXTRA_OPTIONS_KNOBS:
            _set_knob(draft, catalogue.EXTRA_OPTIONS_KNOBS[dotted], value, origin)
        elif dotted in catalogue.EXTRA_OPTIONS_NOTED:
            draft.notes.append(f"{origin} is accepted but not modelled ({catalogue.EXTRA_OPTIONS_NOTED[dotted]})")
        elif dotted in catalogue.EXTRA_OPTIONS_INERT:
            inert.append(dotted)
        else:
            section = "".join(part + "." for part in prefix)
            raise KvplanError(f"unknown TensorRT-LLM option (LLM-API arguments refuse unknown keys)"
                              f"{did_you_mean(str(key), _known_keys(section), section)}", origin)


def _set_knob(draft: Draft, name: str, value: Any, origin: str) -> None:
    if name not in BY_NAME():
        draft.notes.append(f"{origin} is accepted but not modelled")
        return
    if value is None:
        return  # null: TensorRT-LLM's default
    if name in ("kv_cache_memory_bytes", "kv_offloading_size") and value == 0:
        return  # max_gpu_total_bytes 0 (its default) sets no cap; host_cache_size 0 no host pool
    if name == "lora_target_modules" and isinstance(value, list):
        value = ",".join(str(module) for module in value)
    if name == "kv_offloading_size":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= HOST_CACHE_MAXIMUM:
            raise KvplanError(f"expected a whole number of bytes up to {HOST_CACHE_MAXIMUM:,} (the "
                              f"kv_offloading_size knob's 1,048,576 GiB), got {value!r:.40}", origin)
        value = value / GiB  # host_cache_size is bytes; the knob is GiB (exact: a power-of-two divisor)
    draft.set(name, value, origin)


def _known_keys(section: str) -> list[str]:
    """The names a misspelling in this section ("" at the top, "kv_cache_config." within it) is matched against,
    without the section's prefix; at the top, the nested keys too."""
    keys = [*catalogue.EXTRA_OPTIONS_KNOBS, *catalogue.EXTRA_OPTIONS_NOTED, *catalogue.EXTRA_OPTIONS_INERT,
            *catalogue.EXTRA_OPTIONS_SECTIONS, catalogue.ATTENTION_DP_KEY]
    return [key.removeprefix(section) for key in keys if key.startswith(section)]


def _first_content_line(text: str) -> int:
    """The line where the document starts: the first that is neither blank nor a comment nor a marker."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "%", "---")):
            return number
    return 1
