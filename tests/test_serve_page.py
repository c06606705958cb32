"""The page in a real browser: `kvplan serve` runs for real on a free loopback port, headless Chromium (Debian's
chromium package; .ci/run installs it) opens a deep link, and the token count and levers it renders are the
CLI's. Also: the page's assets are local and labelled, and serve binds loopback unless told otherwise."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kvplan.cli.app import main
from kvplan.cli.serve import is_loopback

STATIC = Path(__file__).parent.parent / "kvplan" / "serve" / "static"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
QWEN = "Qwen/Qwen2.5-7B"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(*args: str) -> tuple[subprocess.Popen[str], str]:
    """kvplan serve as a user starts it; its first stderr line, once the API answers."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "kvplan.cli.app", "serve", "--port", str(port), *args],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert process.stderr is not None
    first = process.stderr.readline()
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/gpus", timeout=5).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"kvplan serve did not start: {first}{process.stderr.read()}") from None
            time.sleep(0.2)
    return process, first


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def server():
    process, first = start_server()
    port = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
    assert port, first
    yield f"http://127.0.0.1:{port.group(1)}"
    stop(process)


@pytest.fixture(scope="module")
def chromium():
    found = next((path for path in map(shutil.which, BROWSERS) if path), None)
    if found is None:
        pytest.fail("the browser test needs Chromium: apt-get install -y chromium (.ci/run installs it)")
    return found


def browse(chromium: str, url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium, a fresh profile, no network besides the page; virtual time lets the page's fetches
    finish before the DOM is read."""
    profile = tmp_path / f"profile-{time.monotonic_ns()}"
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={profile}", "--virtual-time-budget=15000", *extra, url],
                          capture_output=True, text=True, timeout=120)


class Texts(HTMLParser):
    """The text of each element with an id, and of every <code> in the levers table."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.hidden: set[str] = set()
        self.lever_flags: list[str] = []
        self.open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.by_id[str(found["id"])] = ""
            if "hidden" in found:
                self.hidden.add(str(found["id"]))
        if tag not in ("input", "br", "meta", "link", "img"):
            self.open.append((tag, found.get("id")))
        if tag == "code" and any(ident == "levers" for _, ident in self.open):
            self.lever_flags.append("")

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self.open:
            if ident:
                self.by_id[ident] += data
        if self.open and self.open[-1][0] == "code" and any(ident == "levers" for _, ident in self.open):
            self.lever_flags[-1] += data


def rendered(chromium: str, url: str, tmp_path: Path) -> Texts:
    result = browse(chromium, url, tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    page = Texts()
    page.feed(result.stdout)
    return page


def cli_document(capsys, *args):
    capsys.readouterr()
    main(["estimate", "--json", *args])
    return json.loads(capsys.readouterr().out)


def test_a_deep_link_renders_the_cli_figures(server, chromium, tmp_path, capsys):
    query = urllib.parse.urlencode({"model": QWEN, "gpu": "rtx3090"})
    page = rendered(chromium, f"{server}/?{query}", tmp_path)
    expected = cli_document(capsys, "--model", QWEN, "--gpu", "rtx3090")
    # README's first run: 6,836 blocks x 16 = 109,376 tokens on an RTX 3090 (tests/test_cli.py), and its four levers
    assert expected["capacity"]["tokens"] == 109_376
    assert page.by_id["tokens"] == "109,376"
    assert page.lever_flags == [lever["flags"] for lever in expected["levers"]]
    assert page.lever_flags[0] == "--tensor-parallel-size 2"
    assert "917,504 B" in page.by_id["formula"]
    assert page.by_id["cli"] == f"kvplan estimate --model {QWEN} --gpu rtx3090"
    assert "answer" not in page.hidden and "error" in page.hidden
    # the form carries the link's inputs back, so that a change starts from them
    assert "NVIDIA GeForce RTX 3090" in page.by_id["gpu"]


def test_a_deep_link_with_a_pasted_command(server, chromium, tmp_path, capsys):
    line = "vllm serve Qwen/Qwen2.5-7B --max-model-len 32768 -tp 2 --port 8000"
    page = rendered(chromium, f"{server}/?{urllib.parse.urlencode({'gpu': 'h100', 'command': line})}", tmp_path)
    expected = cli_document(capsys, "--gpu", "h100", "--", *line.split())
    assert page.by_id["tokens"] == f"{expected['capacity']['tokens']:,}" == "2,248,768"  # README: 140,548 x 16
    assert page.lever_flags == []  # it fits: no levers unless asked
    assert "levers-box" in page.hidden


def test_a_mistake_is_shown_on_the_page_naming_the_field(server, chromium, tmp_path):
    query = urllib.parse.urlencode({"model": QWEN, "gpu": "rtx3090", "max-model-len": "lots"})
    page = rendered(chromium, f"{server}/?{query}", tmp_path)
    assert page.by_id["error"].startswith("max-model-len: expected an integer")
    assert "error" not in page.hidden and "answer" in page.hidden


def test_a_screenshot_of_the_page(server, chromium, tmp_path):
    # how docs/serve.png is made (README, 'The calculator as a web page')
    shot = tmp_path / "serve.png"
    query = urllib.parse.urlencode({"model": QWEN, "gpu": "rtx3090"})
    result = browse(chromium, f"{server}/?{query}", tmp_path, "--hide-scrollbars", "--window-size=1280,1700",
                    f"--screenshot={shot}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


class Form(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.controls: list[str] = []
        self.labelled: set[str] = set()
        self.live: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("input", "select", "textarea"):
            self.controls.append(str(found.get("id")))
        if tag == "label" and found.get("for"):
            self.labelled.add(str(found["for"]))
        if found.get("aria-live"):
            self.live.append(str(found.get("id")))


def test_the_page_is_labelled_and_announces_results():
    form = Form()
    form.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    assert form.controls and set(form.controls) <= form.labelled  # every control has a <label for>
    assert form.live == ["result"]


def test_the_page_loads_nothing_from_elsewhere():
    for name in ("index.html", "app.css", "app.js"):
        text = (STATIC / name).read_text(encoding="utf-8")
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), name
        assert not re.search(r"""(fetch\(|url\()\s*["']?(https?:)?//""", text), name
        assert "@import" not in text, name
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'(?:src|href)="(/static/[^"]+)"', html) == ["/static/app.css", "/static/app.js"]


def test_the_url_carries_the_inputs():
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    assert "history.replaceState" in script and "new URLSearchParams(location.search)" in script


def test_loopback_or_a_warning():
    assert all(is_loopback(host) for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "192.168.1.5", "example.com"))
    process, first = start_server("--host", "0.0.0.0")
    try:
        assert first.startswith("kvplan: warning: serving on 0.0.0.0, not loopback")
    finally:
        stop(process)


def test_loopback_is_the_default_and_says_nothing_more(server):
    assert server.startswith("http://127.0.0.1:")


def test_estimate_does_not_import_the_server():
    probe = ("import sys\nfrom kvplan.cli.app import main\n"
             "code = main(['estimate', '--model', 'Qwen/Qwen2.5-7B', '--gpu', 'rtx3090', '--json'])\n"
             "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette', 'kvplan.serve') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stderr


class DevTools:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: the browser reads
    commands from its fd 3 and writes answers to its fd 4, each message JSON ending in a NUL byte), so a test can
    press keys as a person does: Input.dispatchKeyEvent is the same path a keyboard's events take."""

    CODES = {"Tab": 9, "Enter": 13, "ArrowDown": 40}

    def __init__(self, chromium: str, profile: Path) -> None:
        import os

        commands, self._to_browser = os.pipe()
        self._from_browser, answers = os.pipe()

        def wire() -> None:  # in the child, before exec: the pipe ends on the fds the browser reads
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands)
        os.close(answers)
        self._buffer = b""
        self._next = 0
        self.session: str | None = None
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.call("Emulation.setFocusEmulationEnabled", enabled=True)  # a headless page has the focus

    def call(self, method: str, **params: object) -> dict[str, object]:
        import os
        import select

        self._next += 1
        message: dict[str, object] = {"id": self._next, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == self._next:  # events (no id) are not needed
                    assert "error" not in answer, (method, answer["error"])
                    result: dict[str, object] = answer["result"]
                    return result
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"Chromium did not answer {method}"
            chunk = os.read(self._from_browser, 1 << 16)
            assert chunk, "Chromium closed the pipe"
            self._buffer += chunk

    def value(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")  # type: ignore[attr-defined]

    def wait_for(self, expression: str, seconds: float = 30) -> object:
        deadline = time.monotonic() + seconds
        while not (found := self.value(expression)):
            assert time.monotonic() < deadline, f"never true: {expression}"
            time.sleep(0.05)
        return found

    def press(self, key: str, shift: bool = False) -> None:
        code = self.CODES[key]
        down: dict[str, object] = {"type": "rawKeyDown", "key": key, "code": key, "windowsVirtualKeyCode": code,
                                   "nativeVirtualKeyCode": code, "modifiers": 8 if shift else 0}
        if key == "Enter":
            down.update(type="keyDown", text="\r", unmodifiedText="\r")
        self.call("Input.dispatchKeyEvent", **down)
        self.call("Input.dispatchKeyEvent", **{**down, "type": "keyUp"})

    def type(self, text: str) -> None:
        for char in text:
            self.call("Input.dispatchKeyEvent", type="keyDown", key=char, text=char, unmodifiedText=char)
            self.call("Input.dispatchKeyEvent", type="keyUp", key=char)

    def focused(self) -> str:
        return str(self.value("document.activeElement.id"))

    def close(self) -> None:
        import os

        with contextlib.suppress(AssertionError):  # the browser may close the pipe before it answers
            self.call("Browser.close")
        os.close(self._to_browser)
        os.close(self._from_browser)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def browser(chromium, server, tmp_path):
    devtools = DevTools(chromium, tmp_path / "profile")
    yield devtools
    devtools.close()


def open_page(browser: DevTools, url: str) -> None:
    browser.call("Page.navigate", url=url)
    # the catalogues are in: the GPU list has more than its prompt
    browser.wait_for("document.readyState === 'complete' && document.getElementById('gpu').options.length > 1")


def tab_to(browser: DevTools, wanted: str, most: int = 40) -> list[str]:
    """Tab until the control with id wanted has the focus; the ids the focus passed through."""
    passed = []
    while browser.focused() != wanted:
        assert len(passed) < most, f"{wanted} never took the focus: {passed}"
        browser.press("Tab")
        passed.append(browser.focused())
    return passed


def choose_by_keys(browser: DevTools, select: str, value: str) -> None:
    """Arrow down a focused <select> to the option with value (a closed list takes arrow keys, as on Linux)."""
    index = browser.value(f"Array.from(document.getElementById('{select}').options).findIndex(o => o.value === "
                          f"{json.dumps(value)})")
    assert isinstance(index, int) and index > 0
    for _ in range(index - int(str(browser.value(f"document.getElementById('{select}').selectedIndex")))):
        browser.press("ArrowDown")
    assert browser.value(f"document.getElementById('{select}').value") == value


def test_the_form_by_keyboard_alone(server, browser, capsys):
    open_page(browser, f"{server}/")
    assert browser.focused() == ""  # nothing has the focus yet: the body
    order = tab_to(browser, "model")
    assert order == ["model"]  # the first Tab lands on the model: no control before it
    browser.type(QWEN)
    browser.press("Tab")
    assert browser.focused() == "gpu"
    choose_by_keys(browser, "gpu", "rtx3090")
    # the focus walks the form in reading order, ending on the button
    walk = tab_to(browser, "plan-submit")
    assert walk[:4] == ["tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "engine"]
    assert walk[-3:] == ["context", "command", "plan-submit"]
    browser.press("Enter")
    browser.wait_for("document.getElementById('result').getAttribute('aria-busy') === 'false' && "
                     "!document.getElementById('answer').hidden")
    expected = cli_document(capsys, "--model", QWEN, "--gpu", "rtx3090")
    assert expected["capacity"]["tokens"] == 109_376  # README's first run: 6,836 blocks x 16 tokens
    # what a screen reader announces: the live region's status line, and the figures inside the same region
    live = browser.value("document.querySelector('[aria-live]').id")
    assert live == "result"
    # 109,376 / 131,072 (the model's own max_model_len) = 0.83: one full-length request does not fit
    assert round(expected["capacity"]["max_concurrency"], 2) == 0.83 and expected["error"]
    assert browser.value("document.querySelector('#result #status').textContent") == \
        "109,376 KV tokens, 0.83x concurrency; the engine would refuse to start."
    assert browser.value("document.querySelector('#result #tokens').textContent") == "109,376"
    assert browser.value("document.getElementById('gpu-count').textContent") == "1 GPU"
    assert browser.value("location.search") == f"?model={urllib.parse.quote(QWEN, safe='')}&gpu=rtx3090"


def test_an_error_takes_the_focus_to_its_field(server, browser):
    open_page(browser, f"{server}/")
    tab_to(browser, "model")
    browser.type(QWEN)
    browser.press("Tab")
    choose_by_keys(browser, "gpu", "rtx3090")
    tab_to(browser, "max-model-len")
    browser.type("lots")
    tab_to(browser, "plan-submit")  # away from the field at fault, to the button
    browser.press("Enter")
    browser.wait_for("!document.getElementById('error').hidden")
    assert browser.focused() == "max-model-len"
    alert = str(browser.value("document.querySelector('#result [role=alert]').textContent"))
    assert alert.startswith("max-model-len: expected an integer") and alert.endswith("got 'lots'")
    assert browser.value("document.getElementById('max-model-len').getAttribute('aria-invalid')") == "true"
    assert browser.value("document.getElementById('max-model-len').getAttribute('aria-describedby')") == "error"
    assert browser.value("document.getElementById('status').textContent") == "The estimate failed."
    # fixed from the keyboard, Enter in the field submits again, and the mark goes
    browser.press("Tab", shift=True)
    browser.press("Tab")
    assert browser.focused() == "max-model-len"
    browser.call("Input.dispatchKeyEvent", type="rawKeyDown", key="a", code="KeyA", windowsVirtualKeyCode=65,
                 modifiers=2)  # Ctrl+A: select the field's text, which the typing replaces
    browser.type("8192")
    browser.press("Enter")
    browser.wait_for("!document.getElementById('answer').hidden")
    assert browser.value("document.getElementById('max-model-len').hasAttribute('aria-invalid')") is False
    assert browser.value("document.getElementById('error').hidden") is True


def test_the_gpu_count_is_the_clis(server, chromium, tmp_path, capsys):
    # the CLI counts a deployment's GPUs as TP x PP x DP (Deployment.gpu_count): 2 x 1 x 2 = 4 H100s here
    query = {"model": QWEN, "gpu": "h100", "tensor-parallel-size": "2", "data-parallel-size": "2"}
    page = rendered(chromium, f"{server}/?{urllib.parse.urlencode(query)}", tmp_path)
    expected = cli_document(capsys, "--model", QWEN, "--gpu", "h100", "-tp", "2", "-dp", "2")
    assert expected["gpu"]["count"] == 4
    assert page.by_id["gpu-count"] == "4 GPUs"
    assert page.by_id["headline"].startswith(f"{QWEN} on 4x NVIDIA H100")
    # a pasted command's split is counted too: the answer's count replaces the form's
    line = f"vllm serve {QWEN} -tp 2 -pp 2"
    page = rendered(chromium, f"{server}/?{urllib.parse.urlencode({'gpu': 'h100', 'command': line})}", tmp_path)
    assert page.by_id["gpu-count"] == "4 GPUs"
