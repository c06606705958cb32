"""What the kinds that state a deployment as a launch command share (Kubernetes manifests, the Helm values of
vLLM's production-stack chart, docker-compose files): each container, model spec or service that runs vllm
serve, vLLM's OpenAI server module, sglang.launch_server or trtllm-serve is one deployment, its command read by
deployment.launch like a pasted command."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kvplan import registry
from kvplan.check.item import Built, Image, Item, Problem, flag_name, flag_problem, knob_for
from kvplan.check.source import Settings, Source
from kvplan.deployment.flags import is_short_flag
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA's GPU feature discovery on each node
SHELLS = ("sh", "bash", "dash", "ash", "zsh")


@dataclass(eq=False)
class Launch:
    """A container's command as one list of words, each with the line it was written on."""

    words: list[str]
    lines: list[int | None]
    line: int | None  # the container's own line

    def line_of_word(self, index: int) -> int | None:
        return self.lines[index] if 0 <= index < len(self.lines) else self.line


@dataclass(eq=False)
class Container:
    """What a manifest says of one serving container."""

    name: str
    launch: Launch
    image: Image | None = None
    image_line: int | None = None
    gpu_count: int | None = None
    gpu_count_line: int | None = None
    gpu: str | None = None  # catalogue id from the node selector
    gpu_line: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    extra_lines: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # what the file gets wrong besides the command


def words_of(source: Source, value: Any, *path: Any) -> Launch:
    """A command or args value (a list of words, or one string) with each word's line."""
    if value is None:
        return Launch([], [], source.line(*path))
    if isinstance(value, str):
        return Launch([value], [source.line(*path)], source.line(*path))
    if not isinstance(value, list):
        raise source.error(f"expected a list of words or a string, got {type(value).__name__}", *path)
    return Launch([str(word) for word in value], [source.line(*path, i) for i in range(len(value))],
                  source.line(*path))


def joined(*parts: Launch) -> Launch:
    return Launch([w for p in parts for w in p.words], [n for p in parts for n in p.lines],
                  next((p.line for p in parts if p.line), None))


def server_launch(launch: Launch, image: Image | None) -> Launch | None:
    """The serving command among the words, or None when the container runs something else. A shell's -c
    script is searched for the command that starts the server; an image whose entry point is vLLM's server
    takes bare flags."""
    from kvplan.deployment.launch import SHELL_ENDINGS, shell_words, split_launcher

    words = launch.words
    if len(words) >= 3 and os.path.basename(words[0]) in SHELLS and words[1] in ("-c", "-lc", "-ec"):
        script = shell_words(words[2], "command")
        segments: list[list[str]] = []
        current: list[str] = []
        for word in script:
            if word in SHELL_ENDINGS:
                segments.append(current)
                current = []
            else:
                current.append(word)
        segments.append(current)
        for segment in segments:
            found = server_launch(Launch(segment, [launch.lines[2]] * len(segment), launch.line), None)
            if found is not None:
                return found
        return None
    if len(words) == 1 and " " in words[0].strip():
        words = shell_words(words[0], "command")
        launch = Launch(words, launch.lines * len(words), launch.line)
    try:
        _, command = split_launcher(list(words), "command")
    except KvplanError:
        return None
    if command.engine is not None:
        return launch
    server = image.server if image is not None else None
    if server is not None and (not words or words[0].startswith("-")):
        entry = ["python3", "-m", server.modules[0]]  # the image's entry point
        return Launch([*entry, *words], [launch.line] * len(entry) + launch.lines, launch.line)
    return None


def catalogue_gpu(product: str) -> tuple[str | None, str | None]:
    """A node label's GPU product (NVIDIA-H100-80GB-HBM3) as a catalogue id, or a note saying it is not one."""
    from kvplan.hardware import find_gpu

    try:
        return find_gpu(product).id, None
    except KvplanError:
        return None, (f"GPU product {product!r} from the node selector is not in kvplan's catalogue; pass --gpu "
                      "or kvplan: {gpu: ...}")


def command_item(source: Source, name: str, container: Container, settings: Settings) -> Item:
    from kvplan.deployment.declaration import env_knobs
    from kvplan.deployment.launch import parse_command, split_launcher

    launch = container.launch
    env_words = [f"{k}={v}" for k, v in container.env.items() if k in env_knobs()]
    engine = split_launcher(list(launch.words), name)[1].engine or registry.DEFAULT
    version = settings.knobs.get("engine_version", (None, ""))[0]
    version = str(version) if version is not None else (container.image.version if container.image else None)
    if not registry.dialect(engine).versioned:
        version = None  # only a versioned engine's rules change by release
    lines = _word_lines(launch, engine)
    lines.update(container.extra_lines)
    for key, line in (("image", container.image_line), ("gpu_count", container.gpu_count_line),
                      ("gpu", container.gpu_line)):
        if line:
            lines[key] = line
    lines.update({k: v for k, v in settings.lines.items() if k not in lines})
    defaults = dict(settings.knobs)
    if container.gpu is not None and "gpu" not in defaults:
        defaults["gpu"] = (container.gpu, f"{source.path}:{container.gpu_line}: {GPU_PRODUCT_LABEL}")
    if version is not None and "engine_version" not in defaults:
        defaults["engine_version"] = (version, f"{source.path}:{container.image_line}: image")

    def build() -> Built:
        try:
            return Built(parse_command([*env_words, *launch.words], name, None, version), list(container.problems))
        except KvplanError as exc:
            return Built(Draft(), [*container.problems, flag_problem(exc, engine)])

    flags = tuple(flag_name(w) for w in launch.words if w.startswith("--"))
    return Item(name, container.launch.line, engine, build, lines, dict(settings.requirements), defaults,
                container.gpu_count, container.image, flags, version, container.notes)


def _word_lines(launch: Launch, engine: str) -> dict[str, int]:
    """Each flag's line, by its dash name and by the knob it sets; the served model's line."""
    from kvplan.deployment.declaration import knobs
    lines: dict[str, int] = {}
    for index, word in enumerate(launch.words):
        line = launch.line_of_word(index)
        if not line:
            continue
        if word == "serve" and index + 1 < len(launch.words) and not launch.words[index + 1].startswith("-"):
            lines.setdefault("model", launch.line_of_word(index + 1) or line)
        if not word.startswith("-"):
            continue
        name = flag_name(word)
        lines.setdefault(name, line)
        knob = knob_for(name, engine) if word.startswith("--") else next(
            (k for k in knobs() if name in k.short), None) if is_short_flag(name, engine) else None
        if knob is not None:
            lines.setdefault(knob.name, line)
    return lines


def gpu_count_of(value: Any, source: Source, *path: Any) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit():
        raise source.error(f"a GPU count must be a whole number, got {value!r:.40}", *path)
    return int(text)


def mapping_of(value: Any) -> dict[Any, Any]:
    """A value where the format has a mapping; anything else (a hostile or broken file) counts as empty."""
    return value if isinstance(value, dict) else {}


def list_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def value_at(document: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def selector_gpu(source: Source, terms: Any, path: tuple[Any, ...]) -> tuple[str | None, int | None,
                                                                                 tuple[str, ...]]:
    for t, term in enumerate(terms if isinstance(terms, list) else []):
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        for e, expression in enumerate(expressions if isinstance(expressions, list) else []):
            if not isinstance(expression, dict) or expression.get("key") != GPU_PRODUCT_LABEL:
                continue
            if expression.get("operator") != "In" or not expression.get("values"):
                continue
            line = source.line(*path, t, "matchExpressions", e)
            found = [catalogue_gpu(str(value)) for value in expression["values"]]
            notes = tuple(note for _, note in found if note)
            ids = [gpu for gpu, _ in found if gpu]
            return (",".join(dict.fromkeys(ids)) if ids else None), line, notes
    return None, None, ()
