"""The responsiveness test's server (hoplab.tools.rpm_server) and client
(hoplab.tools.rpm_client) on their own, on this machine's loopback: the draft's URLs,
an upload of any length discarded, the load's congestion control on the server's
accepted connections, and a stop that reaps nginx."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import httpx
import pytest

from hoplab.run.server_home import write_local
from hoplab.tools import rpm_client, rpm_server
from tests.helpers.lab import live_pids

pytestmark = [pytest.mark.root]



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


PORT = _free_port()


def _listening(port: int) -> bool:
    out = subprocess.run(["ss", "-Htln", f"sport = :{port}"], capture_output=True,
                         text=True, check=True).stdout
    return bool(out.strip())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    home = tmp_path / "home"
    home.mkdir()
    write_local(home, rpm_server.files(PurePosixPath(home), "127.0.0.1", PORT, False))
    before = live_pids("nginx")
    err = tmp_path / "server.err"
    with err.open("wb") as fe:
        proc = subprocess.Popen(rpm_server.argv(sys.executable, PurePosixPath(home), PORT,
                                                False, "cubic"),
                                stdin=subprocess.DEVNULL, stderr=fe, start_new_session=True)
    deadline = time.monotonic() + 20
    while not _listening(PORT):
        assert proc.poll() is None, err.read_text()
        assert time.monotonic() < deadline, "the server did not listen"
        time.sleep(0.02)
    try:
        yield proc
    finally:
        # As hoplab stops a server: SIGTERM to its process group.
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert live_pids("nginx") <= before, "nginx outlived its server"
        assert not (home / rpm_server.SOCKET).exists() or not _listening(PORT)


def test_the_server_serves_the_drafts_urls_and_discards_uploads(
        server: subprocess.Popen[bytes]) -> None:
    base = f"https://127.0.0.1:{PORT}"
    with httpx.Client(http2=True, verify=False, timeout=30) as c:
        doc = c.get(f"{base}/.well-known/nq")
        assert doc.http_version == "HTTP/2" and doc.status_code == 200
        assert rpm_client.nq_urls(doc.json()) == rpm_server.urls("127.0.0.1", PORT)
        small = c.get(f"{base}/small")
        assert (small.content, small.headers["content-type"]) == (
            b"x", "application/octet-stream")
        with c.stream("GET", f"{base}/large") as large:
            assert int(large.headers["content-length"]) == rpm_server.LARGE_BYTES
            first = next(large.iter_raw())
            assert first and not first.strip(b"\0")
            # The load's congestion control is on the server's side of the connection.
            ss = subprocess.run(["ss", "-Htni", "state", "established", f"sport = :{PORT}"],
                                capture_output=True, text=True, check=True).stdout
            assert " cubic " in ss, ss
        # 50 MB in, 200 out, and nothing kept: the body is read and dropped as it comes.
        body = (bytes(1 << 20) for _ in range(50))
        up = c.post(f"{base}/upload", content=body,
                    headers={"content-type": "application/octet-stream"})
        assert up.status_code == 200


def test_the_client_uploads_and_probes_for_its_duration(
        server: subprocess.Popen[bytes]) -> None:
    url = f"https://127.0.0.1:{PORT}{rpm_server.WELL_KNOWN}"
    done = subprocess.run(rpm_client.argv(sys.executable, rpm_client.Plan(url, 3.0, "up")),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    res = rpm_client.parse(done.stdout)
    assert res.done is not None and res.done["reason"] in ("time", "stable")
    # Three intervals of 1 s, a load connection added at each; every one moved data up.
    assert [iv.connections for iv in res.intervals] == [{"up": n} for n in (1, 2, 3)]
    assert all(iv.bytes["up"] > 0 and 0.9 < iv.seconds < 1.5 for iv in res.intervals)
    assert res.foreign and res.selfs and not res.failed
    assert all(p.tls_ms is not None and p.tcp_ms > 0 for p in res.foreign)
    assert res.header["httpx"] == httpx.__version__
