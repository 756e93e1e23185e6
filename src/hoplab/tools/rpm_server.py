"""The server of a responsiveness test (draft-ietf-ippm-responsiveness, section
"Responsiveness Test Server"): nginx with HTTP/2 over TLS, in a directory of its own.

It serves the draft's configuration document at /.well-known/nq (the three URLs on one
host and port), /small (1 byte), /large (an 8 GiB object: a sparse file, read as zeros
without touching the disk) and /upload, which takes a POST of any length and discards
it. nginx alone cannot discard a body it is still receiving over HTTP/2 (a `return`
answers at once and resets the stream, which ends the upload), so /upload is proxied,
unbuffered, to a discarding HTTP/1.1 server on a Unix socket in the directory, as the
draft authors' own nginx setup does (network-quality/server).

`python -m hoplab.tools.rpm_server HOME PORT` runs both: the discarding server in a
thread of its own, nginx as its child, stopped and reaped with it. It makes the
listening socket and hands it to nginx (nginx's NGINX variable, as its binary upgrade
does), so the load's congestion control can be set on it: a download's sender is nginx,
which has no directive for TCP_CONGESTION, and an accepted connection keeps the
listener's. The certificate is self-signed, made when the run starts (cryptography);
the client does not verify it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path, PurePath

CONFIG = "nginx.conf"
ROOT = "www"
CERT, KEY = "cert.pem", "key.pem"
SOCKET = "upload.sock"
WELL_KNOWN = "/.well-known/nq"
# The draft: "at least 8GB"; the client asks for it again if it ever ends.
LARGE_BYTES = 8 << 30
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)


def urls(host: str, port: int) -> dict[str, str]:
    """The draft's three URLs, on one host and port so that they share connections."""
    base = f"https://{f'[{host}]' if ':' in host else host}:{port}"
    return {"large_download_url": f"{base}/large", "small_download_url": f"{base}/small",
            "upload_url": f"{base}/upload"}


def nq_config(host: str, port: int) -> bytes:
    """The configuration document of /.well-known/nq (version 1)."""
    return (json.dumps({"version": 1, "urls": urls(host, port)}, indent=2) + "\n").encode()


def config(home: PurePath, port: int, ipv6: bool) -> str:
    """nginx.conf for a server in `home` on `port` (its socket is inherited: see main)."""
    listen = f"[::]:{port} ipv6only=on" if ipv6 else f"0.0.0.0:{port}"
    tmp = home / "tmp"
    # Workers run as root: the run's work directory is root's alone (mode 0700).
    return f"""daemon off;
user root;
worker_processes 1;
pid {home / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type application/octet-stream;
    gzip off;
    etag off;
    keepalive_timeout 120s;
    client_body_timeout 60s;
    send_timeout 60s;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {listen} ssl http2;
        ssl_certificate {home / CERT};
        ssl_certificate_key {home / KEY};
        ssl_protocols TLSv1.2 TLSv1.3;
        root {home / ROOT};
        location = {WELL_KNOWN} {{ default_type application/json; }}
        location = /small {{ }}
        location = /large {{ }}
        location = /upload {{
            client_max_body_size 0;
            proxy_pass http://unix:{home / SOCKET}:/upload;
            proxy_http_version 1.1;
            proxy_request_buffering off;
            proxy_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }}
    }}
}}
"""


def self_signed(host: str) -> tuple[bytes, bytes]:
    """A throwaway certificate for `host` (an address) and its key, PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hoplab responsiveness")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def files(home: PurePath, host: str, port: int, ipv6: bool) -> dict[str, bytes]:
    """Every file the server needs by its path under `home`; "tmp/" is a directory. The
    large object is made sparse when the server starts (main)."""
    cert, key = self_signed(host)
    return {CONFIG: config(home, port, ipv6).encode(), CERT: cert, KEY: key, "tmp/": b"",
            f"{ROOT}{WELL_KNOWN}": nq_config(host, port), f"{ROOT}/small": b"x"}


def argv(python: str, home: PurePath, port: int, ipv6: bool, congestion: str | None
         ) -> list[str]:
    out = [python, "-m", "hoplab.tools.rpm_server", str(home), str(port)]
    if ipv6:
        out.append("--ipv6")
    if congestion:
        out += ["--congestion", congestion]
    return out


# --- the server (runs in the node's namespace) ---------------------------------------


def _discard(conn: socket.socket) -> None:
    """One connection from nginx: HTTP/1.1 requests whose bodies are read and dropped,
    each answered 200 once its body has ended."""
    import h11

    h = h11.Connection(h11.SERVER)
    with conn:
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = conn.recv(1 << 18)
                except OSError:
                    return
                h.receive_data(data)
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
            if isinstance(event, h11.EndOfMessage):
                reply = h.send(h11.Response(status_code=200,
                                            headers=[("content-length", "0")]))
                reply = (reply or b"") + (h.send(h11.EndOfMessage()) or b"")
                try:
                    conn.sendall(reply)
                except OSError:
                    return
                if h.our_state is h11.MUST_CLOSE:
                    return
                h.start_next_cycle()


def _serve_discard(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server.bind(str(path))
    server.listen(64)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_discard, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True, name="discard").start()
    return server


def listener(port: int, ipv6: bool, congestion: str | None) -> socket.socket:
    """The server's listening socket, with the load's congestion control when one is
    asked for: the connections it accepts keep it."""
    family = socket.AF_INET6 if ipv6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if ipv6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    if congestion:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, congestion.encode())
    sock.bind(("::" if ipv6 else "0.0.0.0", port))
    sock.listen(511)
    return sock


def run(home: Path, port: int, ipv6: bool, congestion: str | None) -> int:
    with open(home / ROOT / "large", "wb") as f:
        f.truncate(LARGE_BYTES)
    discard = _serve_discard(home / SOCKET)
    sock = listener(port, ipv6, congestion)
    env = {**os.environ, "NGINX": f"{sock.fileno()};"}
    nginx = subprocess.Popen(["nginx", "-p", f"{home}/", "-c", str(home / CONFIG),
                              "-e", "stderr"], env=env, pass_fds=(sock.fileno(),))
    sock.close()

    def stop(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            nginx.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = nginx.wait()
    discard.close()
    return 0 if code in (0, -signal.SIGTERM) else code


def main(args: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hoplab.tools.rpm_server",
                                 description="A responsiveness test server: nginx, HTTP/2.")
    ap.add_argument("home", type=Path)
    ap.add_argument("port", type=int)
    ap.add_argument("--ipv6", action="store_true")
    ap.add_argument("--congestion", default=None)
    o = ap.parse_args(args)
    return run(o.home, o.port, o.ipv6, o.congestion)


if __name__ == "__main__":
    sys.exit(main())
