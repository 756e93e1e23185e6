"""The client of a responsiveness test, written from draft-ietf-ippm-responsiveness-08
on httpx with h2 (HTTP/2 over TLS): hoplab's own, since goresponsiveness is not served
by the Go module proxy this machine reaches.

`python -m hoplab.tools.rpm_client CONFIG_URL --duration S --direction up|down|both`
runs in the `from` node's namespace (started with the node's exec argv). It reads the
draft's configuration document, then, interval by interval (ID, 1 s):

- adds a load-generating connection (one per direction) up to MNP: an HTTP/2 connection
  of its own that downloads the large object, or uploads an endless body, again and
  again; with `--congestion`, the connection's socket has that congestion control
  (TCP_CONGESTION: an upload's sender is this client; a download's is the server,
  whose listening socket has it, hoplab.tools.rpm_server). What it moves is counted
  by its socket's kernel (TCP_INFO: bytes received, or acknowledged for an upload), not
  as this client reads or writes: a client the CPU holds back reads in bursts, and its
  reads of the last seconds counted 27.6 Mbit/s through a 20 Mbit/s link;
- launches probe pairs spread over the interval (MPS a second at most, their bytes at
  most PTC of the goodput measured): a foreign probe, a new connection timing its TCP
  handshake, its TLS handshake (per round trip of its version) and a GET of the small
  object (hoplab.tools.rpm_probe: asyncio and h2, a third of httpx's CPU); and a self
  probe, a GET of the small object on a load-generating connection chosen at random
  among those moving data, multiplexed with its load (no priority);
- decides with hoplab.analysis.rpm: goodput stable, then responsiveness stable over the
  last MAD intervals; it stops when responsiveness is stable or `duration` is over
  (goodput gets half of it at most, the draft's example of a time limit per stage).

"both" loads the two directions at once (Apple's networkQuality does; the draft's
single score of a concurrent test). Output: JSON lines, a header, then intervals (bytes
each direction's loads moved) and probes (the interval each completed in), then
{"done": ...}. parse() reads it back; it and argv() are pure, only run() imports httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import struct
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hoplab.analysis import rpm as algo
from hoplab.tools import ToolOutputError
from hoplab.tools.rpm_server import TCP_CONGESTION

IPPROTO_TCP, TCP_INFO = 6, 11
# Linux's struct tcp_info: tcpi_bytes_acked and tcpi_bytes_received (u64 each, since
# Linux 4.1 and 4.2) at this offset, after the pacing rates.
_TCP_INFO_BYTES_ACKED = 120
_TCP_INFO_LEN = 136

DIRECTIONS = ("up", "down", "both")
UPLOAD_CHUNK = 1 << 16
# The most probe pairs a second this client launches: the draft's MPS. A foreign probe
# costs the client 2.3-2.5 ms of CPU (hoplab.tools.rpm_probe; 7-8 ms through httpx),
# a self probe less; the draft's PTC (probes' bytes at most 5 % of the goodput) lowers
# the pace where the load moves little. bench/rpm_client.py measures it.
CLIENT_MPS = 100
# A load that ends an interval still unconnected, or a probe, may take this long.
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Plan:
    config_url: str
    duration_s: float
    direction: str
    congestion: str | None = None
    max_pairs: int = CLIENT_MPS  # probe pairs a second at most


def argv(python: str, p: Plan) -> list[str]:
    """The client's argv, with `python` the interpreter hoplab runs on."""
    if p.direction not in DIRECTIONS or p.duration_s <= 0 or p.max_pairs < 1:
        raise ValueError(f"rpm client: a direction of {DIRECTIONS}, a duration and at "
                         f"least one probe pair a second ({p})")
    out = [python, "-m", "hoplab.tools.rpm_client", p.config_url, "--duration",
           f"{p.duration_s:g}", "--direction", p.direction]
    if p.congestion:
        out += ["--congestion", p.congestion]
    if p.max_pairs != CLIENT_MPS:
        out += ["--max-pairs", str(p.max_pairs)]
    return out


def ways(direction: str) -> tuple[str, ...]:
    return ("up", "down") if direction == "both" else (direction,)


# --- the output, parsed ---------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    index: int
    end: float                       # Unix time
    seconds: float                   # how long it lasted (ID, unless the client lagged)
    bytes: dict[str, int]            # by direction
    connections: dict[str, int]


@dataclass
class Result:
    header: dict[str, Any]
    intervals: list[Interval] = field(default_factory=list)
    foreign: list[algo.Foreign] = field(default_factory=list)
    selfs: list[algo.Self] = field(default_factory=list)
    # (interval, Unix start) of each probe, in the order of foreign and selfs.
    foreign_at: list[float] = field(default_factory=list)
    self_at: list[float] = field(default_factory=list)
    failed: list[tuple[str, float, str]] = field(default_factory=list)
    done: dict[str, Any] | None = None

    @property
    def id_s(self) -> float:
        return float(self.header.get("parameters", {}).get("id_s", algo.ID_S))

    def goodput_bps(self, i: int, way: str | None = None) -> float:
        iv = self.intervals[i]
        moved = sum(iv.bytes.values()) if way is None else iv.bytes.get(way, 0)
        return 8 * moved / iv.seconds if iv.seconds > 0 else 0.0


def _number(doc: dict[str, Any], key: str, line: int) -> float:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ToolOutputError(f"rpm client: line {line}: {key} is not a number: {v!r}")
    return float(v)


def _counts(doc: dict[str, Any], key: str, line: int) -> dict[str, int]:
    v = doc.get(key)
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(n, int)
                                          for k, n in v.items()):
        raise ToolOutputError(f"rpm client: line {line}: {key} is not counts by direction")
    return dict(v)


def _line(out: Result, doc: dict[str, Any], n: int) -> None:
    if "interval" in doc:
        out.intervals.append(Interval(int(_number(doc, "interval", n)), _number(doc, "t", n),
                                      _number(doc, "seconds", n), _counts(doc, "bytes", n),
                                      _counts(doc, "connections", n)))
    elif "foreign" in doc:
        tls = doc.get("tls_ms")
        out.foreign.append(algo.Foreign(
            int(_number(doc, "foreign", n)), _number(doc, "tcp_ms", n),
            None if tls is None else _number(doc, "tls_ms", n), _number(doc, "http_ms", n)))
        out.foreign_at.append(_number(doc, "t", n))
    elif "self" in doc:
        out.selfs.append(algo.Self(int(_number(doc, "self", n)), _number(doc, "http_ms", n)))
        out.self_at.append(_number(doc, "t", n))
    elif "failed" in doc:
        out.failed.append((str(doc["failed"]), _number(doc, "t", n), str(doc.get("error"))))
    elif "done" in doc:
        out.done = doc
    else:
        raise ToolOutputError(f"rpm client: line {n}: not an interval, probe or end")


def parse(text: str) -> Result:
    """The client's output; ToolOutputError naming the line if it is not one. An output
    cut short (the client was stopped) keeps what it has, without `done`."""
    out: Result | None = None
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines) and not text.endswith("\n"):
                break  # the last line was being written when the client was stopped
            raise ToolOutputError(f"rpm client: line {n} is not JSON ({e.msg})") from None
        if not isinstance(doc, dict):
            raise ToolOutputError(f"rpm client: line {n} is not a JSON object")
        if out is None:
            if doc.get("tool") != "rpm":
                raise ToolOutputError("rpm client: the first line is not its header")
            out = Result(doc)
            continue
        _line(out, doc, n)
    if out is None:
        raise ToolOutputError("rpm client: no output")
    return out


def replay(res: Result) -> algo.Progress:
    """The algorithm's decisions over the recorded intervals and probes, as the client
    took them: the interval at which goodput's time ran out is in the output's end."""
    p = res.header.get("parameters", {})
    prog = algo.Progress(mad=int(p.get("mad", algo.MAD)), sdt=float(p.get("sdt", algo.SDT)),
                         tmp=float(p.get("tmp", algo.TMP)))
    forced = (res.done or {}).get("goodput_forced_at")
    for iv in res.intervals:
        done_by = [f for f in res.foreign if f.interval <= iv.index]
        selfs = [s for s in res.selfs if s.interval <= iv.index]
        prog.interval(iv.index, res.goodput_bps(iv.index), done_by, selfs,
                      force=forced is not None and iv.index >= forced)
    return prog


# --- the client (runs in the node's namespace) ---------------------------------------


def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def nq_urls(doc: object) -> dict[str, str]:
    """The three URLs of a configuration document; ValueError when the draft says to
    ignore it (not version 1, a URL missing, or URLs on different hosts)."""
    from urllib.parse import urlsplit

    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(
            doc.get("urls"), dict):
        raise ValueError("not a version 1 configuration document")
    got = {k: doc["urls"].get(k) for k in ("large_download_url", "small_download_url",
                                           "upload_url")}
    if not all(isinstance(v, str) and urlsplit(v).scheme in ("http", "https")
               for v in got.values()):
        raise ValueError(f"a URL is missing or not http(s): {got}")
    if len({urlsplit(v).netloc for v in got.values() if v}) != 1:
        raise ValueError("the URLs are not all on one host")
    return {k: str(v) for k, v in got.items()}


class _Load:
    """One load-generating connection: its own HTTP/2 client with one connection."""

    def __init__(self, way: str, urls: dict[str, str], congestion: str | None) -> None:
        import httpx

        self.way, self.urls = way, urls
        opts = ([] if not congestion else
                [(IPPROTO_TCP, TCP_CONGESTION, congestion.encode())])
        transport = httpx.AsyncHTTPTransport(http2=True, verify=False, retries=0,
                                             limits=httpx.Limits(max_connections=1),
                                             socket_options=opts)
        self.client = httpx.AsyncClient(transport=transport, timeout=None)
        self.moved = 0          # what this client read or wrote (without a socket to ask)
        self.ready = False
        self.task: asyncio.Task[None] | None = None
        self.sock: Any = None   # its connection's socket, once connected
        self.folded = 0         # what a closed connection of it had moved

    async def _trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            if self.sock is not None:
                self.folded = self.counted()
            self.sock = info["return_value"].get_extra_info("socket")

    def counted(self) -> int:
        """What the connection's kernel has received (a download) or had acknowledged
        (an upload): goodput where the data arrives, whenever this busy client gets
        round to reading it, and TLS and HTTP/2 framing included."""
        if self.sock is None:
            return self.moved
        try:
            info = self.sock.getsockopt(IPPROTO_TCP, TCP_INFO, _TCP_INFO_LEN)
        except OSError:
            return self.folded
        acked, received = struct.unpack_from("=QQ", info, _TCP_INFO_BYTES_ACKED)
        return self.folded + int(received if self.way == "down" else acked)

    async def _body(self) -> AsyncIterator[bytes]:
        chunk = bytes(UPLOAD_CHUNK)
        while True:
            yield chunk
            # The previous chunk is written once the next is asked for.
            self.moved += len(chunk)
            self.ready = True

    async def run(self) -> None:
        headers = {"accept-encoding": "identity"}
        while True:
            trace = {"trace": self._trace}
            if self.way == "down":
                async with self.client.stream("GET", self.urls["large_download_url"],
                                              headers=headers, extensions=trace) as r:
                    r.raise_for_status()
                    self.ready = True
                    async for data in r.aiter_raw():
                        self.moved += len(data)
            else:
                r = await self.client.post(
                    self.urls["upload_url"], content=self._body(), extensions=trace,
                    headers={**headers, "content-type": "application/octet-stream"})
                r.raise_for_status()


class _Client:
    def __init__(self, plan: Plan, urls: dict[str, str]) -> None:
        self.plan, self.urls = plan, urls
        self.loads: list[_Load] = []
        self.interval = 0
        self.foreign: list[algo.Foreign] = []
        self.selfs: list[algo.Self] = []
        self.probes: set[asyncio.Task[None]] = set()
        self.error: str | None = None

    def add_loads(self) -> None:
        for way in ways(self.plan.direction):
            if sum(x.way == way for x in self.loads) < algo.MNP:
                load = _Load(way, self.urls, self.plan.congestion)
                load.task = asyncio.get_running_loop().create_task(self._guard(load))
                self.loads.append(load)

    async def _guard(self, load: _Load) -> None:
        try:
            await load.run()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the draft: a load connection's error aborts the test
            self.error = f"a {load.way} load connection failed: {type(e).__name__}: {e}"

    async def foreign_probe(self) -> None:
        from hoplab.tools import rpm_probe

        start = time.time()
        try:
            got = await asyncio.wait_for(rpm_probe.foreign(self.urls["small_download_url"]),
                                         PROBE_TIMEOUT_S)
        except Exception as e:
            _emit({"failed": "foreign", "t": start, "error": f"{type(e).__name__}: {e}"})
            return
        rtts = 2 if got.tls_version in ("TLSv1.2", "TLSv1.1", "TLSv1") else 1
        probe = algo.Foreign(self.interval, 1000 * got.tcp_s, 1000 * got.tls_s / rtts,
                             1000 * got.http_s)
        self.foreign.append(probe)
        _emit({"foreign": probe.interval, "t": start, "tcp_ms": round(probe.tcp_ms, 3),
               "tls_ms": None if probe.tls_ms is None else round(probe.tls_ms, 3),
               "tls": got.tls_version, "tls_rtts": rtts, "http_ms": round(probe.http_ms, 3)})

    async def self_probe(self) -> None:
        ready = [x for x in self.loads if x.ready]
        if not ready:
            return
        load = random.choice(ready)
        start, t0 = time.time(), time.perf_counter()
        try:
            r = await asyncio.wait_for(load.client.get(
                self.urls["small_download_url"], headers={"accept-encoding": "identity"}),
                PROBE_TIMEOUT_S)
            r.raise_for_status()
        except Exception as e:
            _emit({"failed": "self", "t": start, "error": f"{type(e).__name__}: {e}"})
            return
        probe = algo.Self(self.interval, 1000 * (time.perf_counter() - t0))
        self.selfs.append(probe)
        _emit({"self": probe.interval, "t": start, "http_ms": round(probe.http_ms, 3),
               "load": load.way})

    def launch(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.probes.add(task)
        task.add_done_callback(self.probes.discard)

    async def probe_interval(self, pairs: int, until: float) -> None:
        """`pairs` probe pairs spread evenly over the interval, foreign and self in turn."""
        step = max(0.0, until - time.monotonic()) / pairs
        for k in range(pairs):
            at = until - (pairs - k) * step
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            self.launch(self.foreign_probe())
            await asyncio.sleep(step / 2)
            self.launch(self.self_probe())

    def count(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for load in self.loads:
            out[load.way] = out.get(load.way, 0) + load.counted()
        return out

    async def run(self) -> str:
        prog = algo.Progress()
        begun = time.monotonic()
        end, goodput_end = begun + self.plan.duration_s, begun + self.plan.duration_s / 2
        forced: int | None = None
        before: dict[str, int] = {}
        goodput, last = 0.0, begun
        self.add_loads()
        while True:
            # Each interval is ID long from the previous one's end (a lagging loop makes
            # it longer, and goodput counts the time it took).
            until = last + algo.ID_S
            pairs = min(self.plan.max_pairs, algo.probe_pairs(goodput)) if goodput else 1
            await self.probe_interval(pairs, until)
            await asyncio.sleep(max(0.0, until - time.monotonic()))
            now, ended = self.count(), time.monotonic()
            moved = {w: now.get(w, 0) - before.get(w, 0) for w in ways(self.plan.direction)}
            before, seconds, last = now, ended - last, ended
            goodput = 8 * sum(moved.values()) / seconds
            _emit({"interval": self.interval, "t": time.time(), "seconds": round(seconds, 6),
                   "bytes": moved,
                   "connections": {w: sum(x.way == w for x in self.loads)
                                   for w in ways(self.plan.direction)}})
            if forced is None and not prog.saturated and time.monotonic() >= goodput_end:
                forced = self.interval
            prog.interval(self.interval, goodput, self.foreign, self.selfs,
                          force=forced is not None)
            if self.error is not None:
                _emit({"done": True, "reason": "error", "error": self.error,
                       "goodput_forced_at": forced})
                return "error"
            if prog.done or time.monotonic() >= end - 1e-3:
                _emit({"done": True, "reason": "stable" if prog.done else "time",
                       "goodput_forced_at": forced})
                return "ok"
            self.interval += 1
            # The draft adds INC connections at each interval, up to MNP.
            self.add_loads()

    async def close(self) -> None:
        for task in [*self.probes, *(x.task for x in self.loads if x.task)]:
            task.cancel()
        await asyncio.gather(*self.probes, *(x.task for x in self.loads if x.task),
                             return_exceptions=True)
        for load in self.loads:
            try:
                await asyncio.wait_for(load.client.aclose(), 5)
            except Exception:
                continue


async def _main(plan: Plan) -> int:
    import h2
    import httpx

    async with httpx.AsyncClient(http2=True, verify=False, timeout=PROBE_TIMEOUT_S) as c:
        r = await c.get(plan.config_url)
        r.raise_for_status()
        urls = nq_urls(r.json())
    _emit({"tool": "rpm", "config": plan.config_url, "urls": urls,
           "direction": plan.direction, "duration_s": plan.duration_s,
           "congestion": plan.congestion, "start": time.time(),
           "parameters": {"mad": algo.MAD, "id_s": algo.ID_S, "tmp": algo.TMP,
                          "sdt": algo.SDT, "mnp": algo.MNP, "mps": algo.MPS,
                          "ptc": algo.PTC},
           "httpx": httpx.__version__, "h2": h2.__version__})
    client = _Client(plan, urls)
    try:
        outcome = await client.run()
    finally:
        await client.close()
    return 0 if outcome == "ok" else 1


def main(args: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hoplab.tools.rpm_client",
                                 description="Responsiveness under working conditions (RPM).")
    ap.add_argument("config_url")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--direction", choices=DIRECTIONS, default="down")
    ap.add_argument("--congestion", default=None)
    ap.add_argument("--max-pairs", type=int, default=CLIENT_MPS)
    o = ap.parse_args(args)
    if o.duration <= 0:
        ap.error("--duration must be positive")
    if o.max_pairs < 1:
        ap.error("--max-pairs must be at least 1")
    return asyncio.run(_main(Plan(o.config_url, o.duration, o.direction, o.congestion,
                                  o.max_pairs)))


if __name__ == "__main__":
    sys.exit(main())
