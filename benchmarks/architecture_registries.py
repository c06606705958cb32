"""Which model architectures each engine release registers, read from the release wheels by ast (no engine is
imported), written as architecture -> the ranges of covered releases that register it:
kvplan/engines/vllm/data/architectures.json and kvplan/engines/sglang/data/architectures.json.

    pip download --no-deps vllm==0.33.0 -d WHEELS        # one wheel per covered release (kvplan/engines/*/releases.py)
    python benchmarks/architecture_registries.py vllm WHEELS/vllm-*.whl
    python benchmarks/architecture_registries.py sglang WHEELS/sglang-*.whl
    python benchmarks/architecture_registries.py trtllm COMMIT _arch_index.py [MODEL_MAP=COMMIT:models/__init__.py] \
        [Name=COMMIT:modeling_x.py ...] [ENGINE:Name=where: a MODEL_MAP key of another stored copy]

Each argument is a wheel, or a folder holding a wheel's files unpacked (then the wheel's file name in a SOURCE file
beside them). What each engine registers:
- vLLM: the keys of the dict its ModelRegistry is built from, vllm/model_executor/models/registry.py _VLLM_MODELS
  (the ** spreads of _TEXT_GENERATION_MODELS, _EMBEDDING_MODELS, _MULTIMODAL_MODELS, _SPECULATIVE_DECODING_MODELS,
  _TRANSFORMERS_*_MODELS ...); releases before registry.py: vllm/model_executor/models/__init__.py _MODELS.
- SGLang: sglang/srt/models/registry.py import_model_classes: every top-level module of sglang/srt/models with an
  EntryClass registers each entry's class __name__ (an alias or an import resolved to the class's own name).
- TensorRT-LLM (no wheel on PyPI): the PyTorch backend's tensorrt_llm/_torch/models/_arch_index.py
  MODEL_ARCH_TO_MODULE, the static index of every @register_auto_model("<arch>") name in its modeling_*.py
  (test_lazy_model_zoo.py fails where the two differ), from the stored NVIDIA/TensorRT-LLM sources at one commit.
  Those sources are not dated to a release; the file lists the releases kvplan applies them to
  (kvplan/engines/trtllm/releases.py), as it does the budget read from the same sources. The TensorRT engine
  backend's names: tensorrt_llm/models/__init__.py MODEL_MAP's keys, from a stored copy at its own commit.
A release whose wheel was not read is left out of the file's "releases"; kvplan checks only the releases listed."""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

from kvplan.deployment.launch import release_tuple

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = {"vllm": ROOT / "kvplan/engines/vllm/data/architectures.json",
          "sglang": ROOT / "kvplan/engines/sglang/data/architectures.json",
          "trtllm": ROOT / "kvplan/engines/trtllm/data/architectures.json"}
VLLM_FILES = ("vllm/model_executor/models/registry.py", "vllm/model_executor/models/__init__.py")
SGLANG_MODELS = "sglang/srt/models/"


class Wheel:
    """A wheel or an unpacked folder: its version and the text of the files under a prefix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name if path.is_file() else (path / "SOURCE").read_text().strip()
        found = re.match(r"^[a-z_]+-(\d+\.\d+\.\d+)", self.name)
        if not found:
            raise SystemExit(f"{path}: no version in {self.name}")
        self.version = found.group(1)

    def files(self, prefix: str) -> dict[str, str]:
        if self.path.is_file():
            with zipfile.ZipFile(self.path) as wheel:
                return {name: wheel.read(name).decode("utf-8-sig") for name in wheel.namelist()
                        if name.startswith(prefix) and name.endswith(".py")}
        return {str(p.relative_to(self.path)): p.read_text(encoding="utf-8-sig") for p in self.path.rglob("*.py")
                if str(p.relative_to(self.path)).startswith(prefix)}


def _top_dicts(tree: ast.Module) -> dict[str, ast.Dict]:
    dicts = {}
    for node in tree.body:
        value: ast.expr | None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            dicts[target.id] = value
    return dicts


def _dict_keys(name: str, dicts: dict[str, ast.Dict]) -> set[str]:
    """The keys of a module-level dict, its ** spreads of other module-level dicts included."""
    keys = set()
    for key, value in zip(dicts[name].keys, dicts[name].values, strict=True):
        if key is None and isinstance(value, ast.Name) and value.id in dicts:
            keys |= _dict_keys(value.id, dicts)
        elif key is None and isinstance(value, ast.DictComp):
            keys |= _filtered_keys(value, dicts)
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
        else:
            raise SystemExit(f"{name}: an entry that is neither a string key nor a spread: {ast.dump(key or value)}")
    return keys


def _filtered_keys(spread: ast.DictComp, dicts: dict[str, ast.Dict]) -> set[str]:
    """`**{k: (mod, arch) for k, (mod, arch) in _TEXT_GENERATION_MODELS.items() if arch == "LlamaForCausalLM"}`
    (registry.py _EMBEDDING_MODELS, 0.6.4 on): the keys of that dict whose class is the one named."""
    loop = spread.generators[0]
    source = loop.iter.func.value if isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Attribute) \
        else None
    test = loop.ifs[0] if len(loop.ifs) == 1 else None
    if not (isinstance(source, ast.Name) and source.id in dicts and isinstance(test, ast.Compare)
            and isinstance(test.comparators[0], ast.Constant)):
        raise SystemExit(f"a ** spread of a form not read: {ast.dump(spread)}")
    wanted = test.comparators[0].value
    table = dicts[source.id]
    return {str(key.value) for key, value in zip(table.keys, table.values, strict=True)
            if isinstance(key, ast.Constant) and isinstance(value, ast.Tuple)
            and isinstance(value.elts[-1], ast.Constant) and value.elts[-1].value == wanted}


def vllm_architectures(wheel: Wheel) -> set[str]:
    files = wheel.files("vllm/model_executor/models/")
    for path, registry in zip(VLLM_FILES, ("_VLLM_MODELS", "_MODELS"), strict=True):
        if path in files:
            dicts = _top_dicts(ast.parse(files[path]))
            if registry in dicts:
                return _dict_keys(registry, dicts)
    raise SystemExit(f"{wheel.name}: no _VLLM_MODELS / _MODELS in {VLLM_FILES}")


def _class_names(tree: ast.Module) -> dict[str, str]:
    """Each module-level name and the class __name__ it holds: classes, imports and aliases."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = node.name
        elif isinstance(node, ast.ImportFrom):
            names.update({alias.asname or alias.name: alias.name for alias in node.names})
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = names.get(node.value.id, node.value.id)
    return names


def _entries(value: ast.expr) -> list[str]:
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.Attribute):
        return [value.attr]
    if isinstance(value, (ast.List, ast.Tuple)):
        return [name for element in value.elts for name in _entries(element)]
    if isinstance(value, ast.BinOp):
        return _entries(value.left) + _entries(value.right)
    if isinstance(value, ast.IfExp):  # either branch may register
        return _entries(value.body) + _entries(value.orelse)
    if isinstance(value, ast.Starred):
        return _entries(value.value)
    raise SystemExit(f"EntryClass of a form not read: {ast.dump(value)}")


def sglang_architectures(wheel: Wheel) -> set[str]:
    found: set[str] = set()
    for path, text in wheel.files(SGLANG_MODELS).items():
        if "/" in path[len(SGLANG_MODELS):]:  # pkgutil.iter_modules: top-level modules only
            continue
        tree = ast.parse(text)
        names = _class_names(tree)
        for node in ast.walk(tree):
            target = node.targets[0] if isinstance(node, ast.Assign) else \
                node.target if isinstance(node, ast.AugAssign) else None
            if isinstance(target, ast.Name) and target.id == "EntryClass":
                assert isinstance(node, (ast.Assign, ast.AugAssign))
                found.update(names.get(entry, entry) for entry in _entries(node.value))
    return found


def ranges(by_release: dict[str, set[str]]) -> dict[str, list[list[str]]]:
    """architecture -> [[first, last], ...]: the runs of consecutive releases read that register it."""
    releases = sorted(by_release, key=lambda v: release_tuple(v) or ())
    out: dict[str, list[list[str]]] = {}
    for arch in sorted(set().union(*by_release.values())):
        runs: list[list[str]] = []
        for previous, release in zip([None, *releases[:-1]], releases, strict=True):
            if arch not in by_release[release]:
                continue
            if runs and previous is not None and arch in by_release[previous]:
                runs[-1][1] = release
            else:
                runs.append([release, release])
        out[arch] = runs
    return out


def _compact(document: dict) -> str:
    """JSON with one architecture a line."""
    head = {key: value for key, value in document.items() if key != "architectures"}
    lines = [f"  {json.dumps(arch)}: {json.dumps(runs)}" for arch, runs in document["architectures"].items()]
    return json.dumps(head, indent=1)[:-2] + ',\n "architectures": {\n' + ",\n".join(lines) + "\n }\n}\n"


def trtllm_document(commit: str, index: Path, extras: list[str]) -> dict:
    """The PyTorch backend's registered names from a stored copy of _torch/models/_arch_index.py at `commit`, and
    `extras`, "Name=COMMIT:tensorrt_llm/_torch/models/modeling_x.py": a decorator read in a stored modeling file of
    another commit whose name that index lacks."""
    from kvplan.engines.trtllm.releases import RELEASES

    modules = _top_dicts(ast.parse(index.read_text()))["MODEL_ARCH_TO_MODULE"]
    provided = {str(k.value): f"tensorrt_llm/_torch/models/{v.value!s}.py"
                for k, v in zip(modules.keys, modules.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
    read_at = dict.fromkeys(provided, commit[:8])
    engine_map: dict[str, object] = {}
    engine_extras = {extra.partition("=")[0][len("ENGINE:"):]: extra.partition("=")[2] for extra in extras
                     if extra.startswith("ENGINE:")}
    for extra in extras:
        name, _, where = extra.partition("=")
        if name.startswith("ENGINE:"):
            continue
        if name == "MODEL_MAP":
            map_commit, _, copy = where.partition(":")
            engine_map = {"source": "tensorrt_llm/models/__init__.py MODEL_MAP keys (GEMMA*_ARCHITECTURE from "
                                    "models/gemma/config.py): the TensorRT engine backend's", "commit": map_commit,
                          "also": engine_extras,
                          "architectures": sorted(_map_keys(Path(copy)) | set(engine_extras))}
            continue
        read_at[name], _, provided[name] = where.partition(":")
    covered = [RELEASES.covered[0], RELEASES.covered[-1]]
    return {
        "source": "tensorrt_llm/_torch/models/_arch_index.py MODEL_ARCH_TO_MODULE keys (the PyTorch backend's "
                  "@register_auto_model names; test_lazy_model_zoo.py holds the two equal) at one commit, and "
                  "decorators of stored modeling_*.py files of other commits that index lacks, read from the "
                  "stored NVIDIA/TensorRT-LLM sources by benchmarks/architecture_registries.py. The stored sources "
                  "are not dated to a release: kvplan applies them to the releases listed, as it does the budget "
                  "read from the same sources (kvplan/engines/trtllm/releases.py)",
        "commit": commit,
        "releases": list(RELEASES.covered),
        "provided_by": {arch: provided[arch] for arch in sorted(provided)},
        "read_at": {arch: read_at[arch] for arch in sorted(read_at)},
        "engine_backend": engine_map,
        "architectures": {arch: [covered] for arch in sorted(provided)},
    }


def _map_keys(copy: Path) -> set[str]:
    """MODEL_MAP's keys, a Name key resolved by the module-level string constants beside it."""
    tree = ast.parse(copy.read_text())
    constants = {node.targets[0].id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)}
    table = _top_dicts(tree)["MODEL_MAP"]
    return {str(key.value) if isinstance(key, ast.Constant) else str(constants[key.id])
            for key in table.keys if isinstance(key, (ast.Constant, ast.Name))}


def main(argv: list[str]) -> int:
    if argv[0] == "trtllm":
        trt = trtllm_document(argv[1], Path(argv[2]), argv[3:])
        OUTPUT["trtllm"].write_text(_compact(trt))
        print(f"trtllm: {len(trt['architectures'])} architectures at {argv[1][:8]} -> {OUTPUT['trtllm']}")
        return 0
    engine, paths = argv[0], [Path(p) for p in argv[1:]]
    read = vllm_architectures if engine == "vllm" else sglang_architectures
    wheels = sorted((Wheel(p) for p in paths), key=lambda w: release_tuple(w.version) or ())
    by_release = {wheel.version: read(wheel) for wheel in wheels}
    document = {
        "source": ("vllm/model_executor/models/registry.py _VLLM_MODELS keys (before it: models/__init__.py _MODELS)"
                   if engine == "vllm" else "sglang/srt/models/*.py EntryClass class names (registry.py "
                   "import_model_classes)") + ", read by ast from each release's wheel by "
                   "benchmarks/architecture_registries.py",
        "wheels": [wheel.name for wheel in wheels],
        "releases": list(by_release),
        "architectures": ranges(by_release),
    }
    OUTPUT[engine].write_text(_compact(document))
    print(f"{engine}: {len(by_release)} releases, {len(document['architectures'])} architectures -> {OUTPUT[engine]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
