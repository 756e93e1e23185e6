"""A team's dashboard: `hoplab serve --token-file F` answers only with the token, lets a
browser in once with ?token= (a cookie, the token gone from the address), and never
writes the token to its log."""

from __future__ import annotations

import http.client
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.web import HOPLAB, URL, start_server, stop_server

TOKEN = "5f1c9e0a7b3d4c2e8f6a1b0c9d8e7f6a"


@pytest.fixture()
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture()
def guarded(store_path: tuple[Path, dict[str, list[int]]], token_file: Path
            ) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    db, _ids = store_path
    proc, line = start_server(db, "--port", "0", "--token-file", str(token_file))
    match = URL.search(line)
    assert match
    try:
        yield int(match.group(1)), proc
    finally:
        stop_server(proc)


def _get(port: int, path: str, headers: dict[str, str] | None = None
         ) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def test_without_the_token_nothing_is_answered(guarded: tuple[int, object]) -> None:
    port, _ = guarded
    for path in ("/", "/runs", "/api/runs", "/run/1", "/?token=wrong" + TOKEN[5:]):
        assert _get(port, path).status == 401, path
    assert _get(port, "/api/runs", {"Authorization": "Bearer nottheone"}).status == 401
    assert _get(port, "/api/runs", {"Cookie": "hoplab_token=nottheone"}).status == 401


def test_the_token_opens_it_and_a_browser_keeps_it_in_a_cookie(
        guarded: tuple[int, object]) -> None:
    port, _ = guarded
    assert _get(port, "/api/runs", {"Authorization": f"Bearer {TOKEN}"}).status == 200
    signed = _get(port, f"/runs?token={TOKEN}&experiment=x")
    assert signed.status == 303
    assert signed.getheader("Location") == "/runs?experiment=x"
    cookie = signed.getheader("Set-Cookie") or ""
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert _get(port, "/runs", {"Cookie": cookie.split(";")[0]}).status == 200


def test_the_token_is_not_in_the_log(store_path: tuple[Path, dict[str, list[int]]],
                                     token_file: Path, tmp_path: Path) -> None:
    db, _ids = store_path
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([HOPLAB, "serve", "--db", str(db), "--port", "0",
                                 "--token-file", str(token_file)],
                                stdout=subprocess.PIPE, stderr=err,
                                env={**os.environ, "COLUMNS": "200"})
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline().decode()
        match = URL.search(line)
        assert match, line
        port = int(match.group(1))
        assert _get(port, f"/runs?token={TOKEN}").status == 303
        assert _get(port, "/").status == 401
    finally:
        stop_server(proc)
    text = log.read_text()
    assert "/runs?token=…" in text and " 303" in text, text
    assert TOKEN not in text


@pytest.mark.parametrize("mode, text, said", [
    (0o644, TOKEN, "readable by others"),
    (0o600, "short", "at least 16"),
])
def test_a_bad_token_file_is_refused(store_path: tuple[Path, dict[str, list[int]]],
                                     tmp_path: Path, mode: int, text: str, said: str) -> None:
    db, _ids = store_path
    path = tmp_path / "tok"
    path.write_text(text)
    path.chmod(mode)
    done = subprocess.run([HOPLAB, "serve", "--db", str(db), "--port", "0",
                           "--token-file", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert said in done.stderr and str(path) in done.stderr


def _answer(port: int, path: str, headers: dict[str, str] | None = None
            ) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of GET `path`, sent exactly as written."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


@pytest.mark.parametrize(("path", "location"), [
    ("//evil.example/", "/evil.example/"),                 # not another host
    ("/\\evil.example/", "/evil.example/"),                # a browser's //evil.example/
    ("///evil.example/x?y=1&", "/evil.example/x?y=1"),
    ("/%E2%82%AC", "/%E2%82%AC"),                          # non-ASCII: was a 500
    ("/%ff", "/%EF%BF%BD"),                                # not UTF-8: was a 500
    ("/a%0d%0aX:%20y", "/a%0D%0AX%3A%20y"),                # CR LF: was no answer at all
    ("/runs?experiment=%0d%0aX:%20y", "/runs?experiment=%0D%0AX%3A+y"),
])
def test_the_sign_in_redirect_stays_on_this_dashboard(
        guarded: tuple[int, object], path: str, location: str) -> None:
    port, _ = guarded
    sep = "&" if "?" in path else "?"
    status, headers, _ = _answer(port, f"{path}{sep}token={TOKEN}")
    assert status == 303 and headers["location"] == location
    assert "x" not in headers


def test_a_token_given_twice_is_never_echoed(guarded: tuple[int, object]) -> None:
    port, _ = guarded
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for path in (f"/runs?token={TOKEN}", f"/api/runs?token={TOKEN}",
                 "/runs?token=someothersecretvalue"):
        status, _, body = _answer(port, path, bearer)
        assert status == 400 and b"not both" in body, (path, body)
        assert TOKEN.encode() not in body and b"someothersecret" not in body
    cookie = {"Cookie": f"hoplab_token={TOKEN}"}
    status, _, body = _answer(port, "/runs?token=someothersecretvalue", cookie)
    assert status == 401 and b"someothersecret" not in body
