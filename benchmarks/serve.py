"""kvplan serve's speed: one `kvplan serve` process on a free loopback port, asked for an estimate over HTTP
with keep-alive connections. Prints the median (and 90th percentile) latency of a warm estimate, one request at
a time, and the estimates per second the one process answers to CLIENTS connections at once, for DURATION
seconds. Targets: median at most 10 ms, at least 100 requests/s on 2 cores. The clients run on the same cores
as the server, so the rate is a floor."""

from __future__ import annotations

import http.client
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

QUERY = "/api/estimate?" + urllib.parse.urlencode({"model": "Qwen/Qwen2.5-7B", "gpu": "rtx3090",
                                                   "max-model-len": "32K"})
WARM, TIMED, CLIENTS, DURATION = 50, 500, 4, 5.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ask(connection: http.client.HTTPConnection) -> None:
    connection.request("GET", QUERY)
    response = connection.getresponse()
    body = response.read()
    if response.status != 200 or b'"tokens"' not in body:
        raise SystemExit(f"unexpected answer {response.status}: {body[:200]!r}")


def wait_until_up(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("kvplan serve exited before it answered")
        try:
            ask(http.client.HTTPConnection("127.0.0.1", port, timeout=10))
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("kvplan serve did not answer within 60 s")


def latency(port: int) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(WARM):
        ask(connection)
    times = []
    for _ in range(TIMED):
        start = time.perf_counter()
        ask(connection)
        times.append(time.perf_counter() - start)
    return times


def throughput(port: int) -> float:
    done = [0] * CLIENTS
    stop_at = time.perf_counter() + DURATION

    def client(slot: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while time.perf_counter() < stop_at:
            ask(connection)
            done[slot] += 1

    threads = [threading.Thread(target=client, args=(slot,)) for slot in range(CLIENTS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.perf_counter() - start)


def main() -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "kvplan.cli.app", "serve", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_up(port, process)
        times = sorted(latency(port))
        rate = throughput(port)
    finally:
        process.terminate()
        process.wait(timeout=10)
    median = statistics.median(times) * 1000
    p90 = times[int(len(times) * 0.9)] * 1000
    print(f"warm estimate over HTTP ({TIMED} requests, one at a time): median {median:.2f} ms, p90 {p90:.2f} ms "
          f"(target: median <= 10 ms)")
    print(f"throughput ({CLIENTS} keep-alive clients, {DURATION:g} s): {rate:.0f} requests/s (target: >= 100)")


if __name__ == "__main__":
    main()
