"""The package's shape: layers import only downwards, packages never import each other in a circle, and no
function grows past 60 lines. Every import counts, the ones inside functions too (they are how a circle hides),
except those under `if TYPE_CHECKING:`, which never run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "kvplan"

# Lowest first. A module belongs to the first entry its dotted name starts with (kvplan.models.layers -> models).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kvplan.errors", "kvplan.units", "kvplan.registry"),
    ("kvplan.models", "kvplan.hardware"),
    ("kvplan.capacity", "kvplan.weights"),
    ("kvplan.plan",),
    ("kvplan.deployment",),
    ("kvplan.engines",),
    ("kvplan.levers",),  # what to change: re-planned by the engines, part of every estimate's answer
    ("kvplan.api",),
    ("kvplan.sizing", "kvplan.check", "kvplan.explain", "kvplan.simulate", "kvplan.verify",
     "kvplan.calibration"),
    ("kvplan.cli", "kvplan.serve", "kvplan.__main__"),
)
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(path): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str, tree: ast.Module, is_package: bool) -> set[str]:
    """The kvplan modules NAME imports, wherever in the file."""
    found: set[str] = set()
    skipped = {id(child) for node in ast.walk(tree) if _type_checking_only(node)
               for stmt in node.body for child in ast.walk(stmt)}  # type: ignore[attr-defined]
    base = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("kvplan"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - node.level + 1]
                module = ".".join(anchor + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.startswith("kvplan"):
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "import_module":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and str(first.value).startswith("kvplan"):
                found.add(str(first.value))
    return found


def layer_of(module: str) -> int | None:
    for index, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return index
    return None


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    trees = modules()
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    known = set(trees)
    result = {}
    for name, tree in trees.items():
        targets = imports(name, tree, paths[name].name == "__init__.py")
        # `from kvplan.x import y` names module kvplan.x.y only when it exists; else y is an attribute of kvplan.x
        result[name] = {target for target in targets if target in known}
    return result


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    unplaced = [name for name in graph if name != "kvplan" and layer_of(name) is None]
    assert not unplaced, f"modules outside every layer: {unplaced}"


def test_layers_import_only_downwards(graph: dict[str, set[str]]) -> None:
    upward = []
    for name, targets in graph.items():
        own = layer_of(name)
        if own is None:
            continue
        for target in targets:
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                upward.append(f"{name} -> {target}")
    assert not upward, "lower layers import higher ones:\n" + "\n".join(sorted(upward))


def test_packages_import_no_circle(graph: dict[str, set[str]]) -> None:
    edges: dict[str, set[str]] = {}
    for name, targets in graph.items():
        for target in targets:
            if package_of(name) != package_of(target) and package_of(target) != "kvplan":
                edges.setdefault(package_of(name), set()).add(package_of(target))
    circle = _a_cycle(edges)
    assert circle is None, "packages import each other in a circle: " + " -> ".join(circle or [])


def _a_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_function_over_60_lines() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


def test_the_checks_see_a_violation() -> None:
    """The walker finds an import hidden inside a function, and the cycle finder a loop of three."""
    tree = ast.parse("def f():\n    from kvplan.cli.app import main\n")
    assert "kvplan.cli.app" in imports("kvplan.units", tree, False)
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_docstrings_point_only_at_files_that_exist() -> None:
    """A repository path named in kvplan's source (docs/calibration.md, tests/...) is a file of this repository;
    the design notes outside it (DESIGN.md) are not named."""
    root = PACKAGE.parent
    # this repository's own layout (a path of another repository's, tests/unittest/... say, is a citation)
    pattern = re.compile(r"(?<![\w/.])(docs/[\w-]+\.md|kvplan/[\w./-]+\.(?:py|md|yaml|json)|benchmarks/\w+\.py|"
                         r"tests/test_\w+\.py|tests/fixtures/[\w./-]+\.\w+|examples/[\w./-]+\.\w+)")
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        missing += [f"{path.relative_to(root)}: {name}" for name in pattern.findall(text) if not (root / name).exists()]
        missing += [f"{path.relative_to(root)}: DESIGN.md"] * ("DESIGN.md" in text)
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)
