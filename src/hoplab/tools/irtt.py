"""irtt (0.9) client/server argv and a parser for its JSON output (``-o -``).

irtt reports durations in nanoseconds; everything here is in seconds. One-way delays come from
the wall clocks of two hosts, so they are only meaningful when those clocks agree (inside one
machine's namespaces they do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hoplab.tools import ToolOutputError, check_family, load_json

NS = 1e-9


@dataclass(frozen=True)
class Client:
    """One irtt client run; ``dscp`` is passed verbatim to ``--dscp``."""

    host: str
    port: int = 2112
    duration_s: float = 10.0
    interval_s: float = 0.02
    length: int = 172
    dscp: int | None = None
    hmac: str | None = None
    ipv6: bool = False


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _go_duration(seconds: float) -> str:
    # Go's time.ParseDuration takes units, not bare floats; whole ms keep argv readable.
    ns = round(seconds / NS)
    return f"{ns // 1_000_000}ms" if ns % 1_000_000 == 0 else f"{ns}ns"


def client_argv(c: Client) -> list[str]:
    """JSON to stdout (``-o -``), quiet (``-Q``), explicit ``-4``/``-6``."""
    if c.duration_s <= 0 or c.interval_s <= 0 or c.length < 0:
        raise ValueError(f"irtt: duration_s and interval_s must be > 0, length >= 0 ({c})")
    check_family("irtt", c.host, c.ipv6)
    argv = ["irtt", "client", "-o", "-", "-Q", "-6" if c.ipv6 else "-4",
            "-i", _go_duration(c.interval_s), "-l", str(c.length), "-d", _go_duration(c.duration_s)]
    if c.dscp is not None:
        argv.append(f"--dscp={c.dscp}")
    if c.hmac is not None:
        argv.append(f"--hmac={c.hmac}")
    return [*argv, _hostport(c.host, c.port)]


def server_argv(bind: str, port: int) -> list[str]:
    return ["irtt", "server", "-b", _hostport(bind, port)]


@dataclass(frozen=True)
class Sample:
    """One round trip. ``t_unix`` is the client's send wall time."""

    seq: int
    t_unix: float
    rtt_s: float | None
    send_delay_s: float | None
    receive_delay_s: float | None
    ipdv_s: float | None
    lost: str


@dataclass(frozen=True)
class Result:
    """Counts and stats as irtt computed them; ``*_loss_pct`` in percent (0-100)."""

    version: str
    samples: tuple[Sample, ...]
    packets_sent: int
    packets_received: int
    # The requests that reached the server: what it sent back (upstream's received,
    # downstream's sent). None where irtt did not report it.
    server_packets_received: int | None
    loss_pct: float
    upstream_loss_pct: float | None
    downstream_loss_pct: float | None
    duplicates: int
    late_packets: int
    rtt_median_s: float | None
    ipdv_mean_s: float | None


LOST_VALUES = ("false", "true", "true_down", "true_up")


def _ns(d: dict[str, Any], key: str, scale: float = NS) -> float | None:
    v = d.get(key)
    return None if v is None else float(v) * scale


def _sample(rt: dict[str, Any]) -> Sample:
    lost = rt["lost"]
    if lost not in LOST_VALUES:
        raise ValueError(f"round trip {rt.get('seqno')}: unknown lost value {lost!r}")
    delay, ipdv = rt.get("delay") or {}, rt.get("ipdv") or {}
    sent = rt["timestamps"]["client"]["send"]["wall"]
    return Sample(seq=int(rt["seqno"]), t_unix=float(sent) * NS, rtt_s=_ns(delay, "rtt"),
                  send_delay_s=_ns(delay, "send"), receive_delay_s=_ns(delay, "receive"),
                  ipdv_s=_ns(ipdv, "rtt"), lost=lost)


def parse(text: str) -> Result:
    """Parse irtt's JSON. ``ipdv_s`` is the round-trip IPDV against the previous sample."""
    doc = load_json("irtt", text)
    if "stats" not in doc or "round_trips" not in doc:
        raise ToolOutputError("irtt: output is JSON but has no 'stats'/'round_trips'")
    try:
        st = doc["stats"]
        samples = tuple(_sample(rt) for rt in doc["round_trips"] or [])
        res = Result(
            version=str(doc["version"]["irtt"]), samples=samples,
            packets_sent=int(st["packets_sent"]), packets_received=int(st["packets_received"]),
            server_packets_received=(None if st.get("server_packets_received") is None
                                     else int(st["server_packets_received"])),
            loss_pct=float(st["packet_loss_percent"]),
            upstream_loss_pct=_ns(st, "upstream_loss_percent", 1.0),
            downstream_loss_pct=_ns(st, "downstream_loss_percent", 1.0),
            duplicates=int(st["duplicates"]), late_packets=int(st["late_packets"]),
            rtt_median_s=_ns(st.get("rtt") or {}, "median"),
            ipdv_mean_s=_ns(st.get("ipdv_round_trip") or {}, "mean"))
    except (KeyError, TypeError, ValueError) as e:
        raise ToolOutputError(f"irtt: unexpected JSON layout ({type(e).__name__}: {e})") from None
    if len(samples) != res.packets_sent:
        raise ToolOutputError(f"irtt: {len(samples)} round trips but stats say "
                              f"{res.packets_sent} packets sent")
    return res
