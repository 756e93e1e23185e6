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
from urllib.parse import parse_qsl, urlencode

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
        plain = self.plain
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer " and self._good(auth[7:].strip()):
            await self.app(scope, receive, send)
            return
        cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
        if COOKIE in cookies and self._good(cookies[COOKIE].value):
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        if len(given) == 1 and self._good(given[0]):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            where = scope["path"] + (f"?{rest}" if rest else "")
            await plain(303, "signed in\n", {
                "Location": where,
                "Set-Cookie": f"{COOKIE}={given[0]}; HttpOnly; SameSite=Strict; Path=/",
                "Cache-Control": "no-store"})(scope, receive, send)
            return
        await plain(401, "this dashboard needs its access token: open it once with "
                         "?token=TOKEN (the token in the file given to hoplab serve "
                         "--token-file), or send Authorization: Bearer TOKEN\n",
                    {"WWW-Authenticate": 'Bearer realm="hoplab"'})(scope, receive, send)


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
