"""What a web page in the user's browser cannot do to `hoplab serve`: read it through
DNS rebinding (a foreign Host), or take its threads and memory with many requests."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.web.server import MAX_REFUSALS, MAX_REQUESTS, host_allowed, split_host
from tests.helpers.web import Served, serving


@pytest.fixture(scope="module")
def own(store_path: tuple[Path, dict[str, list[int]]]) -> Iterator[Served]:
    """A server of its own: these tests hold all its request slots for a while."""
    with serving(*store_path) as s:
        yield s


def _port(served: Served) -> int:
    return int(served.url.rsplit(":", 1)[1])


def raw_get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    """A GET with exactly the Host header given (None: none at all), as a rebinding
    page's request arrives; status and body (0 when the server closed without an answer,
    as it does past both of its bounds)."""
    head = f"GET {path} HTTP/1.1\r\nConnection: close\r\n"
    if host is not None:
        head += f"Host: {host}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall((head + "\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    if not data:
        return 0, b""
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_a_foreign_host_is_refused(served: Served) -> None:
    port = _port(served)
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}",
                 f"127.0.0.1:{port + 1}", None, f"localhost:{port}:{port}"):
        status, body = raw_get(port, "/api/runs", host)
        assert status == 403, host
        assert b"lab-a" not in body, host          # nothing of the store leaks
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}"):
        status, body = raw_get(port, "/api/runs", host)
        assert status == 200, host
        assert b"lab-a" in body


@pytest.mark.parametrize(("header", "bound", "port", "names", "allowed"), [
    ("127.0.0.1:8080", "127.0.0.1", 8080, (), True),
    ("127.0.0.2:8080", "127.0.0.1", 8080, (), True),        # loopback is loopback
    ("[::1]:8080", "127.0.0.1", 8080, (), True),
    ("localhost", "127.0.0.1", 80, (), True),               # no port: 80
    ("localhost", "127.0.0.1", 8080, (), False),
    ("192.0.2.7:8080", "127.0.0.1", 8080, (), False),
    ("192.0.2.7:8080", "0.0.0.0", 8080, (), True),          # an address is not rebound
    ("router.lan:8080", "0.0.0.0", 8080, (), False),        # a name may be
    ("Router.LAN.:8080", "0.0.0.0", 8080, ("router.lan",), True),
    ("", "127.0.0.1", 8080, (), False),
    ("127.0.0.1:80a", "127.0.0.1", 8080, (), False),
])
def test_host_rule(header: str, bound: str, port: int, names: tuple[str, ...],
                   allowed: bool) -> None:
    assert host_allowed(header, bound, port, names) is allowed


def test_split_host() -> None:
    assert split_host("[::1]:8080") == ("::1", 8080)
    assert split_host("Example.COM") == ("example.com", None)
    assert split_host("[::1]x") is None
    assert split_host("a:1:2") is None


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _stall(port: int, n: int) -> list[socket.socket]:
    """n connections that sent half a request head: each holds a thread of the server."""
    held = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        held.append(s)
    return held


def test_requests_at_once_are_capped(own: Served) -> None:
    port, pid = _port(own), own.proc.pid
    base = _threads(pid)
    held = _stall(port, MAX_REQUESTS)
    try:
        deadline = time.monotonic() + 10
        while _threads(pid) < base + MAX_REQUESTS:  # the server has taken every slot
            assert time.monotonic() < deadline, (_threads(pid), base)
            time.sleep(0.01)
        status, body = raw_get(port, "/api/runs", f"127.0.0.1:{port}")
        assert status == 503, body
        # Far more than both bounds: the extra connections get no thread at all.
        held += _stall(port, MAX_REFUSALS + 20)
        time.sleep(0.5)
        assert _threads(pid) <= base + MAX_REQUESTS + MAX_REFUSALS
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 10
    while True:                        # the slots come back as the held threads end
        status, _ = raw_get(port, "/api/runs", f"127.0.0.1:{port}")
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200
