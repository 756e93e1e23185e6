"""The latency of the test frames themselves (RFC 2544 section 26.2), with hoplab-gen:
every frame carries its sequence number and send time; a receiver on the receiving node,
on the same machine's clock (namespaces share it), gives one-way latency and the share
of frames that arrived out of order.

Runs after the search, at the rate it found, with the ingress counter taken away so
that the frames reach the receiver's socket.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hoplab.errors import HoplabError
from hoplab.kinds.procedure import Context
from hoplab.record import Metric, RawOutput
from hoplab.tools import hoplab_gen


@dataclass(frozen=True)
class Tagged:
    received: int
    out_of_order: int
    median_ms: float
    p99_ms: float
    max_ms: float

    def metrics(self, key: str) -> list[Metric]:
        share = 100 * self.out_of_order / self.received if self.received else 0.0
        return [Metric("ndr_one_way_ms", self.median_ms, "ms", key=f"{key} median"),
                Metric("ndr_one_way_ms", self.p99_ms, "ms", key=f"{key} p99"),
                Metric("ndr_one_way_ms", self.max_ms, "ms", key=f"{key} max"),
                Metric("ndr_out_of_order", share, "%", key=key)]


def measure(ctx: Context, exe: str, receiver: str, dst: str, ports: Sequence[int],
            send: Callable[[], object], window_s: float, drain_s: float,
            raw: list[RawOutput], name: str) -> Tagged | None:
    """Starts a receiver per port, runs `send`, and combines what they saw: the
    latencies of the stream with the most frames (imix: its commonest size), the
    out-of-order count of all. None when nothing arrived."""
    idle = max(0.5, drain_s)
    procs = [ctx.launcher.start(f"hoplab-gen recv {name} {port}", receiver,
                                hoplab_gen.recv_argv(exe, dst, port, idle, window_s + idle + 30))
             for port in ports]
    ctx.listening(receiver, "udp", ports, procs)
    send()
    limit = time.time() + idle + 60
    got: list[hoplab_gen.Received] = []
    for proc in procs:
        while proc.poll() is None:
            if time.time() > limit:
                raise HoplabError(f"hoplab-gen's receiver on {receiver} did not finish")
            time.sleep(0.01)
        text = proc.output().decode(errors="replace")
        raw.append(RawOutput(f"{name} hoplab-gen recv", text.encode(), "application/json"))
        got.append(hoplab_gen.received(text))
    main = max(got, key=lambda r: r.frames)
    if main.median_us is None or main.p99_us is None or main.max_us is None:
        return None
    return Tagged(sum(r.frames for r in got), sum(r.out_of_order for r in got),
                  main.median_us / 1000, main.p99_us / 1000, main.max_us / 1000)
