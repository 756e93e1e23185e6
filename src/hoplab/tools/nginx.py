"""nginx (Debian's, 1.22) serving one page of objects: its config, its pages, its argv.

The server of a web flow (hoplab.kinds.web). Everything it needs lives in one
directory the run gives it (its config, document root, pid file and temp paths),
so it touches nothing of the system's nginx and leaves nothing behind once the
directory is removed. It runs in the foreground (`daemon off`) in its own process
group, so hoplab stops and reaps it like iperf3; errors go to stderr.

The page is index.html with one <img> per object. Each object is an SVG image of
exactly its size (an XML comment pads it): the browser must read it whole before
the image and the page's load event are done, and a size is never rounded. Nothing
is compressed (nginx's gzip is off), so what crosses the link is the sizes plus
HTTP and TCP/IP headers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import PurePath

CONFIG = "nginx.conf"
ROOT = "www"
PAGE = "index.html"
# The shortest object: the SVG's own markup around its padding.
_HEAD = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><!--'
_TAIL = b"--></svg>\n"
MIN_OBJECT = len(_HEAD) + len(_TAIL)
# Letters only: the padding can never close the comment.
_PAD = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def object_name(i: int) -> str:
    return f"o{i + 1}.svg"


def svg(size: int, seed: int) -> bytes:
    """An SVG image of exactly `size` bytes (at least MIN_OBJECT)."""
    if size < MIN_OBJECT:
        raise ValueError(f"an object is at least {MIN_OBJECT} bytes, got {size}")
    rng = random.Random(seed)
    return _HEAD + bytes(rng.choices(_PAD, k=size - MIN_OBJECT)) + _TAIL


def page(sizes: Sequence[int]) -> bytes:
    """index.html: one image per object, in order."""
    imgs = "\n".join(f'<img src="{object_name(i)}" width="1" height="1" alt="">'
                     for i in range(len(sizes)))
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>hoplab page of "
            f"{len(sizes)} objects</title></head>\n<body>\n{imgs}\n</body></html>\n").encode()


def config(home: PurePath, port: int, ipv6: bool) -> str:
    """nginx.conf for a server in `home` listening on every address of `port`."""
    listen = f"[::]:{port} ipv6only=on" if ipv6 else str(port)
    tmp = home / "tmp"
    # Workers run as root: the run's work directory is root's alone (mode 0700).
    return f"""daemon off;
user root;
worker_processes 1;
pid {home / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    default_type application/octet-stream;
    types {{ text/html html; image/svg+xml svg; }}
    sendfile on;
    gzip off;
    etag off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {listen};
        root {home / ROOT};
        index {PAGE};
        add_header Cache-Control "no-store";
    }}
}}
"""


def files(home: PurePath, port: int, sizes: Sequence[int], ipv6: bool = False
          ) -> dict[str, bytes]:
    """Every file the server needs, by its path under `home` (where it will live, on
    whichever machine): the config, the page and its objects. "tmp/" is a directory."""
    out = {CONFIG: config(home, port, ipv6).encode(), "tmp/": b"", f"{ROOT}/{PAGE}": page(sizes)}
    for i, size in enumerate(sizes):
        out[f"{ROOT}/{object_name(i)}"] = svg(size, seed=i)
    return out


def argv(home: PurePath) -> list[str]:
    # -e: the error log before the config is read (stderr, not /var/log/nginx).
    return ["nginx", "-p", f"{home}/", "-c", str(home / CONFIG), "-e", "stderr"]


def page_bytes(sizes: Sequence[int]) -> int:
    """What the page's bodies weigh: index.html and every object."""
    return len(page(sizes)) + sum(sizes)
