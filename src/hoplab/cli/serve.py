"""`hoplab serve`: a read-only web dashboard over the store."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from hoplab.cli import store_arg
from hoplab.errors import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve", help="a read-only web dashboard over the store",
        description="Serve a read-only dashboard: the runs (filtered by labels and "
                    "variants), a page per run with its charts, a compare page with "
                    "verdicts and a trend of a metric across runs. GET only; nothing is "
                    "written to the store and nothing is fetched from the internet.")
    store_arg.add(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; "
                        "0.0.0.0 opens it to the network: give it --token-file)")
    p.add_argument("--port", type=int, default=8080, help="default 8080; 0 picks a free one")
    p.add_argument("--allow-host", dest="allow_hosts", action="append", default=[],
                   metavar="NAME",
                   help="a host name the browser may use to reach the dashboard besides "
                        "its address and localhost (repeatable); requests naming any "
                        "other host get 403, against DNS rebinding")
    p.add_argument("--token-file", type=Path, metavar="FILE",
                   help="a team's dashboard: every request needs the token in FILE (mode "
                        "600), as Authorization: Bearer TOKEN or, in a browser, once as "
                        "?token=TOKEN; TLS is a reverse proxy's job (docs/fleet.md)")
    p.add_argument("--quiet", action="store_true", help="do not log each request")
    p.set_defaults(func=run_serve)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_serve(args: argparse.Namespace) -> int:
    from hoplab.render.console import console as make_console
    from hoplab.web.server import make_server

    token = None
    if args.token_file is not None:
        from hoplab.web.token import read_token

        token = read_token(args.token_file)
    # Read-only: serving never creates, migrates or switches a store's journal mode.
    with store_arg.reading(args) as store:
        try:
            server = make_server(store, args.host, args.port, quiet=args.quiet,
                                 allow_hosts=args.allow_hosts, token=token)
        except OSError as exc:
            raise UsageError(f"cannot listen on {args.host}:{args.port}: "
                             f"{exc.strerror or exc}") from None
        with server:
            make_console().print(f"hoplab serve: {server.url} (store "
                                 f"{store.describe()}, read-only; Ctrl-C stops)",
                                 highlight=False, soft_wrap=True, markup=False)
            sys.stdout.flush()
            previous = signal.signal(signal.SIGTERM, _stop)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
            finally:
                signal.signal(signal.SIGTERM, previous)
    return 0
