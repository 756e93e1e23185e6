"""A read-only access token for a team's dashboard (`hoplab serve --token-file F`).

A client sends it as `Authorization: Bearer TOKEN`. A browser opens the URL once with
`?token=TOKEN`: the answer is a redirect to the same page without it, with the token in
a cookie that only this dashboard's pages send (HttpOnly, SameSite=Strict), so the token
does not stay in the address bar, the history or a link someone copies. Every other
request gets 401. TLS is a reverse proxy's job (docs/fleet.md): over plain HTTP the
token crosses the network as it is.
"""

from __future__ import annotations

import logging
import re
import secrets
import stat
from collections.abc import Callable
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from hoplab.errors import UsageError

COOKIE = "hoplab_token"
# Shorter tokens are guessable over a network; `openssl rand -hex 32` gives 64 characters.
MIN_LENGTH = 16


def read_token(path: Path) -> str:
    """The token in `path` (its first line). Refused when others may read the file or the
    token is short: it is a password."""
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"--token-file {path}: {e.strerror or e}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"--token-file {path}: readable by others (mode "
                         f"{stat.S_IMODE(mode):o}); chmod 600 {path}")
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    if len(token) < MIN_LENGTH or not token.isprintable() or " " in token:
        raise UsageError(f"--token-file {path}, line 1: a token of at least {MIN_LENGTH} "
                         f"printable characters without spaces (e.g. openssl rand -hex 32)")
    return token


class TokenCheck:
    """401 for a request without the token; `?token=` becomes a cookie and a redirect."""

    def __init__(self, app: ASGIApp, token: str,
                 plain: Callable[[int, str, dict[str, str]], ASGIApp]) -> None:
        # plain: the server's plain-text answer (its security headers).
        self.app, self.token, self.plain = app, token.encode(), plain

    def _good(self, given: str | bytes | None) -> bool:
        if given is None:
            return False
        value = given.encode() if isinstance(given, str) else given
        return secrets.compare_digest(value, self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        auth = headers.get(b"authorization", b"")
        bearer = auth[:7].lower() == b"bearer "
        if given:
            # Never passed on to a page (which would quote its unknown parameter).
            answer = self._sign_in(scope["path"], query, given, bearer)
        elif bearer and self._good(auth[7:].strip()):
            answer = self.app
        else:
            cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
            good = COOKIE in cookies and self._good(cookies[COOKIE].value)
            answer = self.app if good else self._refused()
        await answer(scope, receive, send)

    def _sign_in(self, path: str, query: list[tuple[str, str]], given: list[str],
                 bearer: bool) -> ASGIApp:
        """?token=: a redirect to the same page of this dashboard without it, the token
        in a cookie; never an answer that quotes what was given."""
        if bearer:
            return self.plain(400, "the token is sent once: as Authorization: Bearer or "
                                   "as ?token=, not both\n", {})
        if len(given) != 1 or not self._good(given[0]):
            return self._refused()
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        return self.plain(303, "signed in\n", {
            "Location": same_page(path) + (f"?{rest}" if rest else ""),
            "Set-Cookie": f"{COOKIE}={given[0]}; HttpOnly; SameSite=Strict; Path=/",
            "Cache-Control": "no-store"})

    def _refused(self) -> ASGIApp:
        return self.plain(401, "this dashboard needs its access token: open it once with "
                               "?token=TOKEN (the token in the file given to hoplab serve "
                               "--token-file), or send Authorization: Bearer TOKEN\n",
                          {"WWW-Authenticate": 'Bearer realm="hoplab"'})


def same_page(path: str) -> str:
    """`path` (as decoded by the server) as a Location that can only be a page of this
    dashboard: one leading slash (`//evil.example/` would be another host, and so would
    `/\\evil.example/` to a browser), every other byte but letters, digits, `/` and
    `-._~` percent-encoded (UTF-8), so that no CR, LF or non-ASCII reaches the header."""
    raw = path.encode("utf-8", "surrogateescape")
    return "/" + quote(raw.lstrip(b"/\\"), safe="/")


_IN_QUERY = re.compile(r"([?&]token=)[^&\s]*")


class RedactToken(logging.Filter):
    """The access log shows `?token=…`, never the token (uvicorn logs each request's
    path with its query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_IN_QUERY.sub(r"\1…", a) if isinstance(a, str) else a
                                for a in record.args)
        record.msg = _IN_QUERY.sub(r"\1…", str(record.msg))
        return True
