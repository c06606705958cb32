"""The line of every key and list item of a YAML document, from the parser's node marks, so that a finding
points at the key that caused it. Read after config_file.load_documents has bounded the document's size, and
stricter than it: a key given twice is refused at any depth, not only at the top."""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError

Path = tuple[Any, ...]  # ("deployments", 0, "max_model_len")


class LocatedError(KvplanError):
    """A KvplanError at a known line of a file."""

    def __init__(self, message: str, where: str, line: int | None) -> None:
        super().__init__(message, where)
        self.line = line


def node_lines(text: str, where: str) -> list[dict[Path, int]]:
    """Per document: key path -> 1-based line of the key (of the item, for list items)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        roots = list(yaml.compose_all(text, Loader=loader))
    except yaml.YAMLError as exc:  # load_documents has parsed the same text; kept for direct callers
        raise KvplanError(f"invalid YAML: {' '.join(str(exc).split())}", where) from None
    return [_walk(root, where) for root in roots]


def _walk(root: Any, where: str) -> dict[Path, int]:
    import yaml

    lines: dict[Path, int] = {}
    if root is None:
        return lines
    stack: list[tuple[Any, Path]] = [(root, ())]
    seen_nodes: set[int] = set()  # an alias shares its node; its keys are walked once
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            here: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key, line = str(key_node.value), key_node.start_mark.line + 1
                if key == "<<":  # a merge key brings in another mapping's keys
                    stack.append((value_node, path))
                    continue
                key_path = path + (key,)
                if key in here:
                    dotted = ".".join(str(p) for p in key_path)
                    raise LocatedError(f"key {dotted!r} is given twice (lines {here[key]} and {line})", where, line)
                here[key] = line
                lines[key_path] = line
                stack.append((value_node, key_path))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[path + (index,)] = item.start_mark.line + 1
                stack.append((item, path + (index,)))
    return lines


def scoped(lines: dict[Path, int], prefix: Path) -> dict[Path, int]:
    """The lines under prefix, with the prefix cut off."""
    size = len(prefix)
    return {path[size:]: line for path, line in lines.items() if path[:size] == prefix and len(path) > size}
