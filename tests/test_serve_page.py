"""The page in a real browser: `kvplan serve` runs for real on a free loopback port, headless Chromium (Debian's
chromium package; .ci/run installs it) opens a deep link, and the token count and levers it renders are the
CLI's. Also: the page's assets are local and labelled, and serve binds loopback unless told otherwise."""

from __future__ import annotations

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
    # README's first run: 6,856 blocks x 16 = 109,696 tokens on an RTX 3090, and its four levers
    assert expected["capacity"]["tokens"] == 109_696
    assert page.by_id["tokens"] == "109,696"
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
    assert page.by_id["tokens"] == f"{expected['capacity']['tokens']:,}" == "2,267,184"  # README: 141,699 x 16
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
