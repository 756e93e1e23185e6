"""The RPM client's foreign probe on asyncio and h2 alone: a new TCP connection, its TLS
handshake and a GET of the small object over HTTP/2, each part timed.

httpx did the same in 7-8 ms of the client's CPU a probe, most of it its connection
pool's and anyio's event-loop rounds (a lock taken is a round); this does it in 2.3-2.5
ms (bench/rpm_client.py, one probe after another with nothing else running), so the
client's probes at the draft's pace leave its loads and self probes the CPU.
Imported only by the client (h2 is there).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.events


def _context() -> ssl.SSLContext:
    # The lab server's certificate is self-signed: not verified (as httpx's verify=False).
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    return ctx


_CTX: ssl.SSLContext | None = None


@dataclass(frozen=True)
class Timed:
    tcp_s: float
    tls_s: float
    http_s: float
    tls_version: str | None


class _Reader(asyncio.Protocol):
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.waiter: asyncio.Future[None] | None = None
        self.closed = False

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def read(self) -> bytes:
        if not self.chunks and not self.closed:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        if not self.chunks:
            raise ConnectionError("the server closed the connection before its answer")
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


async def _get(transport: asyncio.BaseTransport, reader: _Reader, url: str) -> None:
    """One GET over a new HTTP/2 connection, to the end of its answer (status 200)."""
    u = urlsplit(url)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    stream = conn.get_next_available_stream_id()
    conn.send_headers(stream, [(":method", "GET"), (":path", u.path or "/"),
                               (":scheme", u.scheme), (":authority", u.netloc),
                               ("accept-encoding", "identity")], end_stream=True)
    assert isinstance(transport, asyncio.WriteTransport)
    transport.write(conn.data_to_send())
    status: str | None = None
    while True:
        for event in conn.receive_data(await reader.read()):
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                status = dict((bytes(k), bytes(v)) for k, v in event.headers).get(
                    b":status", b"").decode()
            elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
                raise ConnectionError(f"the server reset the stream ({event.error_code})")
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                if status != "200":
                    raise ConnectionError(f"HTTP status {status}")
                return
        out = conn.data_to_send()
        if out:
            transport.write(out)


async def foreign(url: str) -> Timed:
    """A foreign probe of `url` (https): its TCP handshake, TLS handshake and GET."""
    global _CTX
    _CTX = _CTX or _context()
    u = urlsplit(url)
    if u.scheme != "https" or not u.hostname:
        raise ValueError(f"a foreign probe's URL is https://HOST...: {url}")
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    transport, reader = await loop.create_connection(_Reader, u.hostname, u.port or 443)
    try:
        t1 = time.perf_counter()
        tls = await loop.start_tls(transport, reader, _CTX, server_hostname=u.hostname)
        if tls is None:
            raise ConnectionError("TLS did not start")
        transport = tls
        t2 = time.perf_counter()
        obj = tls.get_extra_info("ssl_object")
        if obj is None or obj.selected_alpn_protocol() != "h2":
            raise ConnectionError("the server did not agree to HTTP/2")
        await _get(tls, reader, url)
        return Timed(t1 - t0, t2 - t1, time.perf_counter() - t2, obj.version())
    finally:
        transport.close()
