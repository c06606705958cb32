"""What the kinds that state a deployment as a launch command share (Kubernetes manifests, the Helm values of
vLLM's production-stack chart, docker-compose files): each container, model spec or service that runs vllm
serve, vLLM's OpenAI server module, sglang.launch_server or trtllm-serve is one deployment, its command read by
deployment.launch like a pasted command."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan import registry
from kvplan.check.item import Built, Image, Item, Problem, flag_name, flag_problem, knob_for
from kvplan.check.source import Settings, Source
from kvplan.deployment.flags import is_short_flag
from kvplan.deployment.values import Draft
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.deployment.dialect import Dialect

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA's GPU feature discovery on each node
SHELLS = ("sh", "bash", "dash", "ash", "zsh")


@dataclass(eq=False)
class Launch:
    """A container's command as one list of words, each with the line it was written on."""

    words: list[str]
    lines: list[int | None]
    line: int | None  # the container's own line
    text: str = ""  # the file's text, where the words of a string (a block scalar, a -c script) are found

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
    gpu_count_note: str = ""  # why the GPU count is not known (an unresolved ${VAR})
    nodes: int = 1  # pods that together run one engine (a StatefulSet of --nnodes, a LeaderWorkerSet group)


def words_of(source: Source, value: Any, *path: Any, split: bool = False) -> Launch:
    """A command or args value (a list of words, or one string) with each word's line; split: a string is
    split as a shell (and Docker's string form of entrypoint and command) splits it."""
    line = source.line(*path)
    if value is None:
        return Launch([], [], line, source.text)
    if isinstance(value, str):
        if split and value.strip():
            from kvplan.deployment.launch import shell_words

            words = shell_words(value, source.where(*path))
            return Launch(words, locate(source.text, line, words), line, source.text)
        return Launch([value], [line], line, source.text)
    if not isinstance(value, list):
        raise source.error(f"expected a list of words or a string, got {type(value).__name__}", *path)
    return Launch([str(word) for word in value], [source.line(*path, i) for i in range(len(value))], line,
                  source.text)


def joined(*parts: Launch) -> Launch:
    return Launch([w for p in parts for w in p.words], [n for p in parts for n in p.lines],
                  next((p.line for p in parts if p.line), None), next((p.text for p in parts if p.text), ""))


def locate(text: str, start: int | None, words: list[str]) -> list[int | None]:
    """The line of each word of a string that starts at line `start` of the file: each found in turn in the text
    from there (a folded >- or literal | block keeps its words as written); a word not found keeps the last
    line found."""
    import bisect

    if not text or not start:
        return [start] * len(words)
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    position, line = starts[min(start, len(starts)) - 1], start
    lines: list[int | None] = []
    for word in words:
        found = text.find(word, position, position + 4096 + len(word)) if word else -1
        if found >= 0:
            line = bisect.bisect_right(starts, found)
            position = found + len(word)
        lines.append(line)
    return lines


SHELL_C = re.compile(r"^-[a-z]*c[a-z]*$")  # -c, -lc, -ec, -exc: the next word is the script
SEPARATORS = ("&&", "||", ";;", ";", "|", "&", "\n")


def script_commands(script: str) -> list[str]:
    """A shell script cut into its simple commands at ;, &&, ||, |, & and newlines that are not quoted, escaped
    or inside $( ) (a `;` glued to the word before it cuts too, as the shell reads it)."""
    commands, current, quote, depth, index = [], [], "", 0, 0
    while index < len(script):
        char = script[index]
        if char == "\\" and quote != "'":
            current.append(script[index:index + 2])
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif script.startswith("$(", index):
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char == "#" and (not current or current[-1][-1:] in " \t\n") and not depth:
            end = script.find("\n", index)
            index = len(script) if end < 0 else end
            continue
        elif not depth and (separator := next((s for s in SEPARATORS if script.startswith(s, index)), None)):
            commands.append("".join(current))
            current = []
            index += len(separator)
            continue
        current.append(char)
        index += 1
    commands.append("".join(current))
    return [command for command in commands if command.strip()]


def server_launch(launch: Launch, image: Image | None, engine: str | None = None) -> Launch | None:
    """The serving command among the words, or None when the container runs something else. A shell's -c
    script is searched command by command for the one that starts the server; an image that names an engine
    (or the file's kvplan engine hint) runs that engine's server on bare flags."""
    from kvplan.deployment.launch import shell_words, split_launcher

    words = launch.words
    if len(words) == 1 and (" " in words[0].strip() or "\n" in words[0]):
        words = shell_words(words[0], "command")
        launch = Launch(words, locate(launch.text, launch.line_of_word(0), words), launch.line, launch.text)
    if len(words) >= 3 and os.path.basename(words[0]) in SHELLS and SHELL_C.match(words[1]):
        start = launch.line_of_word(2)
        for script in script_commands(words[2]):
            try:
                segment = shell_words(script, "command")
            except KvplanError:
                continue
            lines = locate(launch.text, start, segment)
            found = server_launch(Launch(segment, lines, launch.line, launch.text), None)
            if found is not None:
                return found
            start = next((n for n in reversed(lines) if n), start)
        return None
    try:
        _, command = split_launcher(list(words), "command")
    except KvplanError:
        return None
    if command.engine is not None:
        return launch
    server = image_engine(image, engine)
    if server is not None and server.entry and (not words or words[0].startswith("-")):
        entry = list(server.entry)
        return Launch([*entry, *words], [launch.line] * len(entry) + launch.lines, launch.line, launch.text)
    return None


def image_engine(image: Image | None, engine: str | None) -> Dialect | None:
    """The engine a container runs without a command: its image's (an engine's own image, or a name with one
    of an engine's fragments in it), else the file's kvplan engine hint."""
    if image is not None:
        server = image.server or next((registry.dialect(name) for name in registry.names()
                                       if registry.dialect(name).names_image(image.reference)), None)
        if server is not None:
            return server
    return registry.dialect(engine) if engine in registry.names() else None


def catalogue_gpu(product: str) -> tuple[str | None, str | None]:
    """A node label's GPU product (NVIDIA-H100-80GB-HBM3) as a catalogue id, or a note saying it is not one."""
    from kvplan.check.gpus import NVIDIA_PRODUCT, label_gpu

    return label_gpu(NVIDIA_PRODUCT, product, {})


def command_item(source: Source, name: str, container: Container, settings: Settings) -> Item:
    from kvplan.deployment.declaration import env_knobs
    from kvplan.deployment.launch import parse_command, split_launcher

    launch = container.launch
    env_words = [f"{k}={v}" for k, v in container.env.items() if k in env_knobs()]
    engine = split_launcher(list(launch.words), name)[1].engine or registry.DEFAULT
    pinned = settings.knobs.get("engine_version", (None, ""))[0]
    pinned = str(pinned) if pinned is not None else (container.image.version if container.image else None)
    # a pinned release decides which removed flags the engine still takes, and the engine's accounting by release
    version = pinned if registry.releases(engine) is not None else None
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
        words, waiting = resolved_words(launch.words, engine)
        if container.gpu_count_note:
            waiting["gpu_count"] = container.gpu_count_note
        try:
            return Built(parse_command([*env_words, *words], name, None, pinned), list(container.problems), waiting)
        except KvplanError as exc:
            return Built(Draft(), [*container.problems, flag_problem(exc, engine)], waiting)

    flags = tuple(flag_name(w) for w in launch.words if w.startswith("--"))
    return Item(name, container.launch.line, engine, build, lines, dict(settings.requirements), defaults,
                container.gpu_count, container.image, flags, version, container.notes,
                gpu_count_note=container.gpu_count_note)


def resolved_words(words: list[str], engine: str) -> tuple[list[str], dict[str, str]]:
    """The words without the values that wait for a variable where a knob needs them (`--tensor-parallel-size
    ${TP}`, `vllm serve $(MODEL)`): knob -> why, for the rules that need it to skip. Other flags keep theirs
    (`--port $(PORT)` changes nothing kvplan plans)."""
    from kvplan.deployment.launch import split_launcher

    kept: list[str] = []
    waiting: dict[str, str] = {}
    launcher = len(words) - len(split_launcher(list(words), "command")[1].args)
    for index, word in enumerate(words):
        variable = unresolved(word)
        if variable is None or index < launcher:
            kept.append(word)
            continue
        flag = word.split("=", 1)[0] if word.startswith("--") and "=" in word else (
            kept[-1] if kept and kept[-1].startswith("--") and "=" not in kept[-1] else None)
        knob = knob_for(flag_name(flag), engine) if flag else None
        if flag is None and not word.startswith("-") and (index == launcher or kept[-1:] == ["serve"]):
            waiting["model"] = f"the model is {variable}, a value set at deploy time"
            continue
        if knob is None:
            kept.append(word)
            continue
        waiting[knob.name] = f"{flag} is {variable}, a value set at deploy time"
        if flag != word.split("=", 1)[0] or "=" not in word:
            kept.pop()  # the flag before its value
    return kept, waiting


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


UNRESOLVED = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)"
                        r"|\{\{\s*(.*?)\s*\}\}")


def unresolved(value: Any) -> str | None:
    """The variable or template a value waits for ($(VAR) Kubernetes did not fill, ${VAR} and $VAR a shell or
    a template tool fills at deploy time, {{ .Values.x }}), or None for a value as it stands."""
    match = UNRESOLVED.search(str(value)) if isinstance(value, str) else None
    if match is None:
        return None
    return match.group(0) if match.group(4) is None else "{{ " + match.group(4)[:60] + " }}"


def gpu_count_of(value: Any, source: Source, *path: Any) -> int | None:
    """A GPU count as the file gives it; None for none, or for one that waits for a variable (unresolved)."""
    if value is None or unresolved(value):
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
    """The GPU a required node affinity's terms pin: a `key In [values]` on a GPU label (the first one found)."""
    from kvplan.check.gpus import NODE_LABELS, label_gpu

    for t, term in enumerate(terms if isinstance(terms, list) else []):
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        expressions = expressions if isinstance(expressions, list) else []
        given = {str(e.get("key")): str((e.get("values") or [""])[0]) for e in expressions if isinstance(e, dict)}
        for e, expression in enumerate(expressions):
            if not isinstance(expression, dict) or expression.get("key") not in NODE_LABELS:
                continue
            if expression.get("operator") != "In" or not isinstance(expression.get("values"), list):
                continue
            line = source.line(*path, t, "matchExpressions", e)
            found = [label_gpu(str(expression["key"]), str(value), given) for value in expression["values"]]
            notes = tuple(note for _, note in found if note)
            ids = [gpu for gpu, _ in found if gpu]
            return (",".join(dict.fromkeys(ids)) if ids else None), line, notes
    return None, None, ()


def labelled_gpu(source: Source, selector: dict[Any, Any], path: tuple[Any, ...]) -> tuple[str | None, int | None,
                                                                                            tuple[str, ...]]:
    """The GPU a nodeSelector pins, by the first GPU label it sets."""
    from kvplan.check.gpus import NODE_LABELS, label_gpu

    labels = {str(k): str(v) for k, v in selector.items()}
    for label in NODE_LABELS:
        if label in labels:
            gpu, note = label_gpu(label, labels[label], labels)
            return gpu, source.line(*path, label), (note,) if note else ()
    return None, None, ()


def gpu_resource(resources: dict[Any, Any]) -> str | None:
    """The device plugin resource (nvidia.com/gpu, amd.com/gpu) a resources mapping counts GPUs in."""
    from kvplan.check.gpus import GPU_RESOURCES

    return next((name for name in GPU_RESOURCES if name in resources), None)
