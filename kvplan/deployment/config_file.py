"""vLLM `--config` YAML files: a mapping of vLLM flag names (dashes or underscores) to values, the model under
`model:`, as `vllm serve --config` reads them. Read safely and boundedly, with each key's line kept so that an
error names file, line and key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan import registry
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError, LocatedError

MAX_FILE_BYTES = 2**20  # a deployment file is a few hundred bytes
MAX_NODES = 100_000  # YAML aliases can make a small file expand into billions of values


def read_text(path: str) -> str:
    file = Path(path).expanduser()
    try:
        with file.open("rb") as handle:  # read at most the limit: /dev/zero or a FIFO has no honest size
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise KvplanError(f"file is over {MAX_FILE_BYTES:,} bytes; a deployment file is a few KB, so this is "
                              "not one", path)
    except FileNotFoundError:
        raise KvplanError("no such file", path) from None
    except IsADirectoryError:
        raise KvplanError("is a directory, not a YAML file", path) from None
    except OSError as exc:
        raise KvplanError(f"cannot read: {exc.strerror}", path) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KvplanError(f"not UTF-8 text (byte {exc.start}); expected YAML", path) from None


KeyPath = tuple[Any, ...]  # ("deployments", 0, "max_model_len")


def load_documents(text: str, where: str) -> list[tuple[Any, dict[str, int]]]:
    """Every YAML document of the text, each with the line of each top-level key."""
    return [(value, {str(path[0]): line for path, line in lines.items() if len(path) == 1})
            for value, lines in load_located(text, where)]


def load_located(text: str, where: str) -> list[tuple[Any, dict[KeyPath, int]]]:
    """Every YAML document of the text, each with the line of every key and list item (from the parser's node
    marks); a key given twice at any depth is refused."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        nodes = list(yaml.compose_all(text, Loader=loader))
        for node in nodes:
            _check_size(node, where)
        values = list(yaml.load_all(text, Loader=loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise KvplanError(f"invalid YAML{line}: {exc.problem}", where) from None
    except yaml.YAMLError as exc:
        raise KvplanError(f"invalid YAML: {' '.join(str(exc).split())}", where) from None
    except RecursionError:
        raise KvplanError("YAML nested too deeply", where) from None
    return [(value, key_lines(node, where)) for node, value in zip(nodes, values, strict=True)]


def key_lines(root: Any, where: str) -> dict[KeyPath, int]:
    """Key path -> 1-based line of the key (of the item, for list items), walking the composed node tree once;
    an alias shares its node, so its keys are walked once, and a merge key (<<) brings in another mapping's."""
    import yaml

    lines: dict[KeyPath, int] = {}
    stack: list[tuple[Any, KeyPath]] = [(root, ())] if root is not None else []
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            here: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key, line = str(key_node.value), key_node.start_mark.line + 1
                if key == "<<":
                    stack.append((value_node, path))
                    continue
                key_path = path + (key,)
                if key in here:
                    dotted = ".".join(str(part) for part in key_path)
                    raise LocatedError(f"key {dotted!r} is given twice (lines {here[key]} and {line})", where, line)
                here[key] = lines[key_path] = line
                stack.append((value_node, key_path))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[path + (index,)] = item.start_mark.line + 1
                stack.append((item, path + (index,)))
    return lines


class ExpansionError(KvplanError):
    """A YAML document that expands past the limits (aliases); node_line: where the count ran over."""

    def __init__(self, message: str, where: str, node_line: int) -> None:
        super().__init__(message, where)
        self.node_line = node_line


def _check_size(root: Any, where: str) -> None:
    import yaml

    seen = 0
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES or depth > 200:
            raise ExpansionError(f"YAML expands to more than {MAX_NODES:,} values or 200 levels (aliases?); "
                                 "not a deployment file", where, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)


def read_engine_config(path: str, engine: str) -> Draft:
    """The engine's own --config file: the options file its dialect reads (trtllm-serve's LLM-API options YAML),
    else a file of flag names."""
    from kvplan.deployment.dialect import dialect_of

    reader = dialect_of(engine).options_reader
    return reader(path) if reader is not None else read_config(path, engine)


def read_config(path: str, engine: str = registry.DEFAULT) -> Draft:
    """A vLLM --config file as a Draft, every value's origin 'file:line: key'."""
    documents = load_documents(read_text(path), path)
    if len(documents) != 1:
        raise KvplanError(f"expected one YAML document, found {len(documents)}", path)
    mapping, lines = documents[0]
    if mapping is None:
        raise KvplanError("file is empty; expected a mapping of vLLM flags", path)
    if not isinstance(mapping, dict):
        raise KvplanError(f"expected a mapping of vLLM flag names to values, got {type(mapping).__name__}", path)
    return draft_from_flags_mapping(mapping, path, engine, lines)


def draft_from_flags_mapping(mapping: dict[Any, Any], path: str, engine: str, lines: dict[str, int]) -> Draft:
    """Each key read as the flag `--key` with its value, as vLLM turns a --config file into arguments, so
    that inert, renamed and unknown keys get the same treatment as on a command line."""
    from kvplan.deployment.flags import INERT_NOTE, parse_flags
    from kvplan.deployment.values import field_for

    draft = Draft()
    inert: list[str] = []  # one note for the whole file, as for a command line
    for key, value in mapping.items():
        origin = f"{path}:{lines.get(str(key), '?')}: {key}"
        if str(key).replace("_", "-") == "config":
            raise KvplanError("a --config file cannot name another config file", origin)
        flag = f"--{key}"
        knob = field_for(str(key), engine)
        if knob is not None and knob.engine_flag:
            if value is None:
                raise KvplanError("has no value (remove the key to keep the engine's default)", origin)
            draft.set(knob.name, value, origin)  # the value as YAML typed it, checked against the knob
            continue
        if isinstance(value, bool):
            tokens = [flag]  # a false store_true flag is simply absent; it is still checked to be a real flag
        elif isinstance(value, list):
            tokens = [flag, *(json.dumps(v) if isinstance(v, (dict, list)) else str(v) for v in value)]
        elif isinstance(value, dict):
            tokens = [flag, json.dumps(value)]
        elif value is None:
            continue
        else:
            tokens = [flag, str(value)]
        parsed = parse_flags(tokens, engine, path, origin=origin, kvplan_knobs=False)
        absent = value is False  # a false on/off flag is simply absent: no value, and not listed as inert
        if absent:
            parsed.values.clear()
        inert += [n.removeprefix(INERT_NOTE) for n in parsed.notes if n.startswith(INERT_NOTE) and not absent]
        parsed.notes = [n for n in parsed.notes if not n.startswith(INERT_NOTE)]
        draft.update(parsed)
    if inert:
        draft.notes.append(INERT_NOTE + ", ".join(inert))
    return draft
