"""throughput: RFC 2544 throughput by frame size (section 26.1): for each size, the
highest rate of UDP frames a path forwards with no loss (NDR), or with loss within a
partial-drop target (PDR), found by bisection over trials; with the latency of a probe
stream at that rate (section 26.2) and the generator's own ceiling beside it.

Frames come from hoplab-gen on the sending node, paced evenly: whole frames to an
AF_PACKET socket where the interface is Ethernet, else UDP sockets; iperf3 where
hoplab-gen cannot run (bench/generators.py measures them and trafgen, whose rate mode
sends in bursts a short queue loses). They are counted where they arrive, by an nftables
counter on the receiving interface's ingress, which drops them (hoplab.tools.rxcount). A
trial counts the frames that arrive up to `drain` after the last was sent (RFC 2544
section 23: late frames count). Loss is frames offered minus frames received over frames
offered (section 26.3; hoplab.analysis.ndr.Trial).

Before a size's search, the generator alone is measured: the highest rate it sends at
here. The search offers no more than that, and an answer at that ceiling says so
(`generator_limited`), so a result never claims a path forwards only what the generator
could send.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hoplab.analysis.ndr import Phase as SearchPhase
from hoplab.analysis.ndr import Search, Trial, bounds_hints, phases
from hoplab.errors import HoplabError
from hoplab.kind_registry import FlowTool, Kind, Option, Reader, register
from hoplab.kinds.flow import address
from hoplab.kinds.path_mtu import largest_frame, probe
from hoplab.kinds.procedure import Context, Result, Running
from hoplab.kinds.stolen_cpu import wait_quiet
from hoplab.kinds.throughput_both import Both
from hoplab.kinds.throughput_curve import (
    BURST_S,
    Runner,
    b2b_metrics,
    back_to_back,
    curve_metrics,
    loss_curve,
)
from hoplab.kinds.throughput_link import resolve as resolve_link
from hoplab.kinds.throughput_tagged import measure as tagged_latency
from hoplab.nodes.executor import LOCAL_MACHINE, Executor
from hoplab.record import Metric, RawOutput, Series
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import choice, parse_bool, parse_percent, parse_time
from hoplab.tools import (
    ToolOutputError,
    hoplab_gen,
    iproute_json,
    load_json,
    ping,
    rxcount,
    trafgen,
)

DEFAULT_SIZES = ",".join(str(s) for s in trafgen.RFC2544_SIZES)
PORT = 5201
# A ping probe stream for the latency at the found rate: one echo every 10 ms.
PROBE_INTERVAL_S = 0.01
METRICS = ("ndr_fps", "ndr_bps", "pdr_fps", "pdr_bps", "generator_fps", "generator_limited",
           "ndr_latency_ms", "invalid_trials", "ndr_one_way_ms", "ndr_out_of_order",
           "frame_loss", "frame_loss_offered_fps", "back_to_back_frames", "back_to_back_fps",
           "frame_over_mtu")


def _sizes(value: object) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if item == "imix":
            out.append("imix")
            continue
        if isinstance(item, bool) or not isinstance(item, int):
            raise ValueError(f"a frame size is a whole number of bytes or \"imix\", "
                             f"not {item!r}")
        if not trafgen.MIN_FRAME[4] <= item <= trafgen.MAX_FRAME:
            raise ValueError(f"a frame size is {trafgen.MIN_FRAME[4]} to "
                             f"{trafgen.MAX_FRAME} bytes (FCS included), not {item}")
        out.append(str(item))
    if not out or len(set(out)) != len(out):
        raise ValueError(f"frame sizes are a non-empty list without repeats: {value!r}")
    return tuple(out)


def _losses(value: object) -> tuple[float, ...]:
    items = value if isinstance(value, list) else [value]
    out = tuple(sorted({parse_percent(v) for v in items}))
    if not out or out[-1] >= 100:
        raise ValueError(f"loss targets are below 100 %: {value!r}")
    return out


def _flows(value: object) -> int:
    n = ov.positive_int(value)
    if n > 1024:
        raise ValueError(f"at most 1024 flows (distinct source ports), not {n}")
    return n


def _trial(value: object) -> float:
    seconds = parse_time(value)
    if not 0.1 <= seconds <= 3600:
        raise ValueError(f"a trial lasts 100ms to 1h, not {value!r}")
    return seconds


def _precision(value: object) -> float:
    pct = parse_percent(value)
    if not 0.01 <= pct <= 50:
        raise ValueError(f"precision is 0.01% to 50% of the rate found, not {value!r}")
    return pct


def _drain(value: object) -> float:
    seconds = parse_time(value)
    if not 0 <= seconds <= 60:
        raise ValueError(f"a drain wait is 0 to 60s, not {value!r}")
    return seconds


OPTIONS: dict[str, Option] = {
    "frame_sizes": Option(_sizes, "frame sizes in bytes, FCS included (RFC 2544), or "
                                  "\"imix\" (7:4:1 of 64, 594 and 1518); over IPv6 the "
                                  "smallest is 78 (RFC 5180)", DEFAULT_SIZES),
    "loss": Option(_losses, "loss target: 0% gives the no-drop rate (NDR), above it a "
                            "partial-drop rate (PDR); a list gives each from one search",
                   '`"0%"`'),
    "flows": Option(_flows, "distinct 5-tuples (source ports), so RSS spreads them", "1"),
    "trial": Option(_trial, "length of each trial (RFC 2544: at least 60s; shorter trials "
                            "are said so in the result)", '`"60s"`'),
    "precision": Option(_precision, "the search stops when the rate found is known to "
                                    "within this share of it", '`"0.5%"`'),
    "direction": Option(choice(("up", "down", "both")), "up (from -> to), down, or both "
                                                       "at once (RFC 2544's bidirectional "
                                                       "test: a trial fails if either "
                                                       "direction loses)", "up"),
    "drain": Option(_drain, "wait for late frames after each trial (RFC 2544 section 23)",
                    '`"2s"`'),
    "family": Option(ov.family, "4 or 6", "4"),
    "search": Option(choice(("binary", "mlr")),
                     "binary: every trial as long as `trial`, guided by the forwarding "
                     "rate of failed trials; mlr: MLRsearch's phases, 1 s trials first, "
                     "then longer ones from their bounds (bench/ndr_search.py: binary "
                     "needs less time here)", "binary"),
    "latency": Option(parse_bool, "latency at the rate found (RFC 2544 section 26.2): "
                                  "of the test frames themselves with hoplab-gen "
                                  "(ndr_one_way_ms, ndr_out_of_order), of a ping stream "
                                  "beside them with iperf3 (ndr_latency_ms)", "true"),
    "generator": Option(choice(("auto", "hoplab-gen", "iperf3")),
                        "the frame generator: hoplab-gen (evenly spaced sendmmsg batches, "
                        "gen/: whole frames to an AF_PACKET socket where the sending "
                        "interface is Ethernet, else UDP sockets), iperf3, or auto: "
                        "hoplab-gen where it is installed and both ends are on this "
                        "machine; the run's metadata names the one that ran and its wire",
                        "auto"),
    "loss_curve": Option(parse_bool, "RFC 2544's frame loss rate (section 26.3): trials at "
                                     "100 %, 90 %, ... of the generator's ceiling until two "
                                     "lose nothing (frame_loss, keys \"SIZE PCT%\")", "false"),
    "back_to_back": Option(parse_bool, "RFC 2544's back-to-back frames (section 26.4): the "
                                       "longest burst at the generator's top rate forwarded "
                                       "whole (back_to_back_frames)", "false"),
}


@dataclass(frozen=True)
class ThroughputOptions:
    frame_sizes: tuple[str, ...]
    losses_pct: tuple[float, ...]
    flows: int
    trial_s: float
    precision_pct: float
    drain_s: float
    latency: bool
    search: str = "binary"
    generator: str = "auto"
    loss_curve: bool = False
    back_to_back: bool = False


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    family = o.get("family", 4)
    sizes = o.get("frame_sizes", tuple(DEFAULT_SIZES.split(",")))
    small = [s for s in sizes if s != "imix" and int(s) < trafgen.MIN_FRAME[family]]
    if small:
        r.ctx.fail((*path, "frame_sizes"), f"over IPv{family} a frame is at least "
                                           f"{trafgen.MIN_FRAME[family]} bytes (RFC 5180), "
                                           f"not {small[0]}")
    opts = ThroughputOptions(frame_sizes=sizes, losses_pct=o.get("loss", (0.0,)),
                             flows=o.get("flows", 1), trial_s=o.get("trial", 60.0),
                             precision_pct=o.get("precision", 0.5),
                             drain_s=o.get("drain", 2.0), latency=o.get("latency", True),
                             search=o.get("search", "binary"),
                             generator=o.get("generator", "auto"),
                             loss_curve=o.get("loss_curve", False),
                             back_to_back=o.get("back_to_back", False))
    flow = Flow(name=name, kind="throughput", src=src, dst=dst,
                direction=o.get("direction", "up"), family=family, options=opts)
    return [flow], [Phase("load", 0.0, 0.0)]


def _run(ex: Executor, argv: list[str], what: str, input: str | None = None) -> str:
    done = ex.run(argv, input=input, timeout=30)
    if done.returncode != 0:
        raise HoplabError(f"{ex.node}: {what} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


@dataclass(frozen=True)
class _Stream:
    """One generator client: frames of one size, a share of the frames, its own port."""

    size: int
    share: float
    port: int
    payload: int


def _streams(size: str, family: int) -> list[_Stream]:
    """A size's streams: one, or imix's three sizes at 7:4:1 of the frames."""
    mix = trafgen.IMIX if size == "imix" else ((int(size), 1),)
    total = sum(n for _, n in mix)
    return [_Stream(s, n / total, PORT + i, trafgen.payload_bytes(s, family))
            for i, (s, n) in enumerate(mix)]


def _sent(text: str) -> hoplab_gen.Sent:
    """Datagrams iperf3's client sent and the seconds it sent for, from its JSON (it
    keeps no record of stalls)."""
    doc = load_json("iperf3", text)
    if doc.get("error"):
        raise HoplabError(f"iperf3: {doc['error']}")
    total = doc.get("end", {}).get("sum", {})
    packets, seconds = total.get("packets"), total.get("seconds")
    if not isinstance(packets, int) or not isinstance(seconds, int | float) or seconds <= 0:
        raise ToolOutputError(f"iperf3: no UDP sender totals in its report: {text[-300:]!r}")
    return hoplab_gen.Sent(packets, float(seconds))


class _Trials:
    """The generator, the counter and the trials of one direction and frame size.

    The generator is hoplab-gen, or iperf3 over UDP with its pacing timer at 100 us:
    frames of the size asked for, sent evenly. trafgen's rate mode sends its ring in
    bursts (bench/generators.py: a third of 100 frames/s of 1518 bytes lost through a
    50 Mbit/s bucket that passes iperf3's 4,000 frames/s whole), which a queue of 20
    frames cannot absorb: a search with it finds the generator's bursts, not the path."""

    def __init__(self, ctx: Context, flow: Flow, opts: ThroughputOptions, size: str,
                 table: str, way: str) -> None:
        self.ctx, self.flow, self.opts, self.table = ctx, flow, opts, table
        self.key = size if flow.direction != "both" else f"{size} {way}"
        self.sender, self.receiver = ((flow.dst, flow.src) if way == "down"
                                      else (flow.src, flow.dst))
        self.tx, self.rx = ctx.nodes[self.sender], ctx.nodes[self.receiver]
        self.dst = address(ctx.plan, self.receiver, flow.family)
        src = address(ctx.plan, self.sender, flow.family)
        dev = iproute_json.route(_run(self.rx, iproute_json.route_get_argv(src),
                                      "ip route get"), src).dev
        self.streams = _streams(size, flow.family)
        self.gen = _generator(opts.generator, all(
            ex.machine == LOCAL_MACHINE for ex in (self.tx, self.rx)))
        # The fast path's frames need the next hop's MAC; where it cannot be had (not
        # Ethernet), UDP sockets.
        self.link = (resolve_link(self.tx, self.dst, flow.family, src)
                     if self.gen is not None else None)
        self.servers: list[Running] = []
        if self.gen is None:
            # One server per stream for every trial of the search (not one-off: -1).
            self.servers = [
                ctx.launcher.start(f"iperf3 server {self.key} {s.port}", self.receiver,
                                   ["iperf3", "-s", "-p", str(s.port)])
                for s in self.streams]
            ctx.listening(self.receiver, "tcp", [s.port for s in self.streams], self.servers)
        self.rx.run(rxcount.delete_argv(table), timeout=30)  # one a killed run left
        # Logged first: a run killed now leaves the table, and `hoplab clean` removes it.
        ctx.launcher.will_undo(self.receiver, rxcount.delete_argv(table))
        _run(self.rx, rxcount.load_argv(), "loading the frame counter",
             input=rxcount.ruleset(table, dev, [(s.port, s.payload + 8)
                                                for s in self.streams]))
        self.raw: list[RawOutput] = []
        self.times: list[float] = []

    def close(self) -> None:
        # This size's servers end with it: the next size's take their ports (a server
        # left running made the next one fail to bind and linger as a zombie).
        for server in self.servers:
            with contextlib.suppress(Exception):
                server.stop()
        with contextlib.suppress(Exception):
            self.rx.run(rxcount.delete_argv(self.table), timeout=30)
            self.ctx.launcher.undone(self.receiver, rxcount.delete_argv(self.table))

    @property
    def generator(self) -> str:
        """The generator as the run's metadata names it (hoplab-gen with its wire)."""
        if self.gen is None:
            return "iperf3"
        return f"{hoplab_gen.BINARY} ({'AF_PACKET' if self.link else 'UDP sockets'})"

    def _argv(self, s: _Stream, fps: float | None, frames: int | None,
              around_qdisc: bool = False) -> list[str]:
        """A stream's sender: at `fps` (None: unpaced) for `frames` (None: one second);
        hoplab-gen's fast path past the sender's qdisc with `around_qdisc`."""
        flows = self.opts.flows
        if self.gen is not None:
            return hoplab_gen.send_argv(
                self.gen, self.dst, s.port, s.payload, flows=flows,
                fps=None if fps is None else fps * s.share,
                frames=None if frames is None else max(1, frames),
                seconds=1.0 if frames is None else None, link=self.link,
                around_qdisc=around_qdisc)
        argv = ["iperf3", "-c", self.dst, "-p", str(s.port), "-u", "-l", str(s.payload),
                "-P", str(flows), "--pacing-timer", "100", "-J",
                "-6" if self.flow.family == 6 else "-4"]
        # -b is per stream, in bits of UDP payload a second (0: unpaced); -k counts every
        # stream's datagrams.
        bps = 0 if fps is None else max(1, round(fps * s.share * s.payload * 8 / flows))
        length = ["-t", "1"] if frames is None else ["-k", str(max(flows, frames))]
        return [*argv, "-b", str(bps), *length]

    def start(self, fps: float | None, seconds: float, frames: int | None = None,
              around_qdisc: bool = False) -> list[Running]:
        """Every stream's sender, at `fps` for `seconds`, or unpaced: `frames` in a
        burst, or for one second when None."""
        procs = []
        for s in self.streams:
            n = (round(fps * s.share * seconds) if fps is not None
                 else None if frames is None else max(1, round(frames * s.share)))
            procs.append(self.ctx.launcher.start(f"{self.generator} {self.key} {s.port}",
                                                 self.sender, self._argv(s, fps, n, around_qdisc)))
        return procs

    def collect(self, procs: list[Running], seconds: float) -> hoplab_gen.Sent:
        """Datagrams sent, and the longest stream's seconds and stalls, once every sender
        is done."""
        limit = time.time() + seconds + 30
        for proc in procs:
            while proc.poll() is None:
                if time.time() > limit:
                    raise HoplabError(f"{self.generator} on {self.sender} did not finish "
                                      "in time")
                time.sleep(0.005)
        parse = _sent if self.gen is None else hoplab_gen.sent
        each = [parse(proc.output().decode(errors="replace")) for proc in procs]
        return hoplab_gen.Sent(sum(e.frames for e in each), max(e.seconds for e in each),
                               max(e.stalled_s for e in each))

    def send(self, fps: float | None, seconds: float, frames: int | None = None,
             around_qdisc: bool = False) -> hoplab_gen.Sent:
        return self.collect(self.start(fps, seconds, frames, around_qdisc), seconds)

    def ceiling(self) -> float:
        """The generator's own rate with no pacing, for one second. hoplab-gen's fast
        path sends it past the sender's qdisc: a lab's shaper on the sender's own egress
        (a link shaped both ways, in `both`) is the path's, and through it the ceiling
        was the path's rate, which a search cannot go above (a CI run: 4,210 frames/s
        where a 2-second trial passes 4,250). iperf3 and UDP sockets cannot go past it."""
        sent, took, _ = self.send(None, 1.0, around_qdisc=True)
        return sent / took

    def burst(self, frames: int, drain_s: float) -> Trial:
        """`frames` back to back, as fast as the generator sends (RFC 2544 26.4)."""
        before = self.counted()
        sent, took, _ = self.send(None, 0.0, frames)
        time.sleep(drain_s)
        self.ctx.tick(time.time() - self.ctx.t0)
        return Trial(sent / took, sent, self.counted() - before, took)

    def counted(self) -> int:
        return rxcount.frames(_run(self.rx, rxcount.read_argv(self.table), "nft"))

    def trial(self, fps: float, seconds: float, drain_s: float) -> Trial:
        """One trial at `fps`, with the generator's own record of how long it sent: its
        loss is the trial's (the search judges whether the generator kept the rate)."""
        self.times.append(time.time() - self.ctx.t0)
        before = self.counted()
        sent, took, stalled = self.send(fps, seconds)
        time.sleep(drain_s)  # RFC 2544 section 23: frames that arrive late still count
        self.ctx.tick(time.time() - self.ctx.t0)
        return Trial(fps, sent, self.counted() - before, took, stalled)

    def latency(self, fps: float, seconds: float) -> list[float]:
        """RTTs (ms) of a ping stream while frames flow at `fps` (RFC 2544 26.2)."""
        stream = ping.Stream(host=self.dst, interval_s=PROBE_INTERVAL_S, duration_s=seconds,
                             ipv6=self.flow.family == 6)
        probe = self.ctx.launcher.start(f"ping {self.key}", self.sender, ping.argv(stream))
        self.send(fps, seconds)
        limit = time.time() + seconds + ping.LINGER_S + 10
        while probe.poll() is None and time.time() < limit:
            time.sleep(0.01)
        text = probe.output().decode(errors="replace")
        self.raw.append(RawOutput(f"{self.flow.name} {self.key} ping", text.encode(),
                                  "text/plain"))
        return [r.rtt_s * 1000 for r in ping.parse(text).replies if r.rtt_s is not None]


def _generator(choice: str, local: bool) -> str | None:
    """hoplab-gen's path, or None for iperf3: `auto` takes hoplab-gen where it is
    installed and both ends are on this machine (it is not copied to devices)."""
    if choice == "iperf3" or (choice == "auto" and not local):
        return None
    exe = hoplab_gen.binary()
    if choice == "hoplab-gen" and (exe is None or not local):
        raise HoplabError("generator = \"hoplab-gen\" needs it installed (make setup builds "
                          "it; or set HOPLAB_GEN to its path) and both ends on this machine")
    return None if exe is None else str(exe)


def _size_bits(size: str) -> float:
    """Bits on the wire per frame as RFC 2544 counts them (FCS included; imix: its mean)."""
    if size == "imix":
        sizes = trafgen.imix_sizes()
        return 8 * sum(sizes) / len(sizes)
    return 8 * int(size)


class TrialRunner(Protocol):
    def trial(self, fps: float, seconds: float, drain_s: float) -> Trial: ...


@dataclass
class Searched:
    """Every trial of a search so far, in the order run, and how many were invalid:
    what a search cut short (interrupted) leaves to store."""

    trials: list[Trial] = field(default_factory=list)
    invalid: int = 0


# After a trial the generator stalled in, the next waits at most this long for a second
# with next to no CPU stolen: stolen stretches lasted 10 to 30 s on this project's machines.
STALL_WAIT_S = 15.0

# An answer at the ceiling has the ceiling measured again; a second measure this much
# above the first says the first was a stall (one unpaced second) and the search runs
# again under it. Ceilings of one generator measured here differ by a few per cent.
RECHECK_ABOVE = 0.10


def _search(trials: TrialRunner, opts: ThroughputOptions, ceiling: float,
            so_far: Searched | None = None, remeasure: Callable[[], float] | None = None
            ) -> tuple[Search, list[Trial], int]:
    """The last phase's search (its trials, full-length, decide the answers), every
    trial of every phase in order, those the generator fell short in included, and the
    number of those (invalid: the search repeated their rates). `so_far` holds the
    trials run, also when the search is cut short. With `remeasure`, an answer at the
    ceiling has the ceiling measured once more, and searched again above it if the first
    was a stall."""
    done = Searched() if so_far is None else so_far
    search, proven = _phases(trials, opts, ceiling, done, 0.0)
    target = min(opts.losses_pct) / 100
    if remeasure is not None and search.limited_by_generator(target):
        again = remeasure()
        if again > ceiling * (1 + RECHECK_ABOVE):
            search, _ = _phases(trials, opts, again, done, proven)
    return search, list(done.trials), done.invalid


def _phases(trials: TrialRunner, opts: ThroughputOptions, ceiling: float, done: Searched,
            proven: float) -> tuple[Search, float]:
    """One search, phase by phase (MLRsearch's, or one binary phase): its last phase and
    the highest rate a valid trial kept."""
    targets = tuple(p / 100 for p in opts.losses_pct)
    plan = (phases(opts.trial_s, opts.precision_pct / 100) if opts.search == "mlr"
            else [SearchPhase(opts.trial_s, opts.precision_pct / 100)])
    hints: tuple[float, ...] = ()
    for phase in plan:
        search = Search(ceiling_fps=ceiling, targets=targets, precision=phase.precision,
                        hints=hints, proven_fps=proven)
        try:
            while (rate := search.next_rate()) is not None:
                trial = trials.trial(rate, phase.trial_s, opts.drain_s)
                search.record(trial)
                if trial.stalled(phase.precision):
                    # The machine took the generator's CPU: the next trial waits out the
                    # burst (hoplab.kinds.stolen_cpu).
                    wait_quiet(STALL_WAIT_S)
        finally:
            done.trials += search.history
            done.invalid += len(search.invalid)
        hints, ceiling = bounds_hints(search), search.ceiling_fps
        proven = max([proven, *(t.rate_fps for t in search.trials)])
    return search, proven


def _cut_short(out: Result, size: str, ceiling: float, times: list[float],
               so_far: Searched) -> None:
    """What an interrupted search of `size` ran: its trials, stored with the run."""
    out.metrics += [Metric("generator_fps", ceiling, "frames/s", key=size),
                    Metric("invalid_trials", float(so_far.invalid), "count", key=size)]
    out.series += _trial_series(size, times[:len(so_far.trials)], so_far.trials)


def _extras(runner: Runner, key: str, opts: ThroughputOptions,
            search: Search) -> list[Metric]:
    """RFC 2544's frame loss curve and back-to-back frames, where asked for."""
    out: list[Metric] = []
    if opts.loss_curve:
        curve = loss_curve(runner, search.ceiling_fps, opts.trial_s,
                                            opts.drain_s)
        out += curve_metrics(curve, key)
    if opts.back_to_back:
        frames, decided = back_to_back(
            runner, round(search.ceiling_fps * BURST_S), opts.drain_s,
            opts.precision_pct / 100)
        out += b2b_metrics(frames, decided, key)
    return out


def _latency(ctx: Context, flow: Flow, trials: _Trials, opts: ThroughputOptions, ndr: float,
             out: Result) -> list[float]:
    """The latency at the NDR: of the tagged test frames with hoplab-gen (into `out`), or
    the RTTs of a ping stream beside iperf3's frames (returned)."""
    if not opts.latency or ndr <= 0:
        return []
    if trials.gen is None:
        return trials.latency(ndr, opts.trial_s)
    trials.close()  # the frames must reach the receiver's socket
    tagged = tagged_latency(
        ctx, trials.gen, trials.receiver, trials.dst, [st.port for st in trials.streams],
        lambda: trials.send(ndr, opts.trial_s), opts.trial_s, opts.drain_s, out.raw,
        f"{flow.name} {trials.key}")
    out.metrics += tagged.metrics(trials.key) if tagged else []
    return []


def _one_size(ctx: Context, flow: Flow, opts: ThroughputOptions, size: str,
              out: Result) -> None:
    index = ctx.test.flows.index(flow)
    ways = ("up", "down") if flow.direction == "both" else (flow.direction,)
    trials: list[_Trials] = []
    try:
        for way in ways:
            trials.append(_Trials(ctx, flow, opts, size, f"hoplab_rx_{index}_{way}", way))
        runner: Runner = (trials[0] if len(trials) == 1
                                           else Both(ctx, trials))
        def measure() -> float:
            return min(t.ceiling() for t in trials)
        ceiling, so_far = measure(), Searched()
        try:
            search, done, invalid = _search(runner, opts, ceiling, so_far, remeasure=measure)
        except KeyboardInterrupt:
            # Interrupted: the run is stored so, with the trials it ran (RFC 2544 keeps
            # every trial; a search cut short still has them to show).
            out.notes["generator"] = trials[0].generator
            _cut_short(out, size, ceiling, trials[0].times, so_far)
            raise
        times = list(trials[0].times)  # the search's: the loss curve's trials come after
        out.metrics += _extras(runner, size, opts, search)
        ndr = search.answer(min(opts.losses_pct) / 100)
        # Latency at the NDR: each direction on its own.
        rtts = {t.key: _latency(ctx, flow, t, opts, ndr, out) for t in trials}
    finally:
        for t in trials:
            t.close()
    out.notes["generator"] = trials[0].generator
    out.metrics += [Metric("generator_fps", search.ceiling_fps, "frames/s", key=size),
                    Metric("invalid_trials", float(invalid), "count", key=size)]
    out.metrics += _answers(search, size, opts, size)
    out.series += _trial_series(size, times, done)
    if isinstance(runner, Both):
        for one, mine in zip(trials, runner.per_way, strict=True):
            out.metrics += _way_answers(search, done, mine, one.key, size, opts)
            out.series += _trial_series(one.key, times, mine[:len(done)])
    for key, rtt in rtts.items():
        out.metrics += _rtt_metrics(key, rtt)
    for t in trials:
        out.raw += t.raw


def _answers(search: Search, size: str, opts: ThroughputOptions, key: str) -> list[Metric]:
    out: list[Metric] = []
    for pct in opts.losses_pct:
        target = pct / 100
        fps = search.answer(target)
        prefix = "ndr" if pct == 0 else "pdr"
        tkey = key if len(opts.losses_pct) == 1 or pct == 0 else f"{key} {pct:g}%"
        out += [Metric(f"{prefix}_fps", fps, "frames/s", key=tkey),
                Metric(f"{prefix}_bps", fps * _size_bits(size), "bit/s", key=tkey),
                Metric("generator_limited", float(search.limited_by_generator(target)),
                       "flag", key=tkey)]
    return out


def _way_answers(search: Search, done: list[Trial], mine: list[Trial], key: str, size: str,
                 opts: ThroughputOptions) -> list[Metric]:
    """One direction's rate in the trial that decided each answer of a search of both."""
    out: list[Metric] = []
    offset = len(done) - len(search.history)
    for pct in opts.losses_pct:
        target = pct / 100
        lo = search.bounds(target)[0]
        deciding = [i for i, t in enumerate(search.history)
                    if any(t is v for v in search.trials) and t.rate_fps == lo
                    and t.loss_ratio <= target]
        fps = max((mine[offset + i].achieved_fps for i in deciding), default=0.0)
        prefix = "ndr" if pct == 0 else "pdr"
        tkey = key if len(opts.losses_pct) == 1 or pct == 0 else f"{key} {pct:g}%"
        out += [Metric(f"{prefix}_fps", fps, "frames/s", key=tkey),
                Metric(f"{prefix}_bps", fps * _size_bits(size), "bit/s", key=tkey)]
    return out


def _trial_series(key: str, times: list[float], done: list[Trial]) -> list[Series]:
    return [Series("throughput_trial", "frames/s", times, [t.rate_fps for t in done],
                   key=key),
            Series("throughput_trial_achieved", "frames/s", times,
                   [t.achieved_fps for t in done], key=key),
            Series("throughput_trial_loss", "%", times,
                   [100 * t.loss_ratio for t in done], key=key)]


def _rtt_metrics(key: str, rtts: list[float]) -> list[Metric]:
    if not rtts:
        return []
    q = (statistics.quantiles(rtts, n=100, method="inclusive") if len(rtts) > 1
         else rtts * 99)
    return [Metric("ndr_latency_ms", statistics.median(rtts), "ms", key=f"{key} median"),
            Metric("ndr_latency_ms", q[98], "ms", key=f"{key} p99")]


def _too_big(ctx: Context, flow: Flow, sizes: Sequence[str]) -> dict[str, int]:
    """The sizes whose frames do not fit the path's MTU (a tunnel's), and that MTU."""
    frames = {s: max(int(x) for x, _ in trafgen.IMIX) if s == "imix" else int(s)
              for s in sizes}
    sender, receiver = ((flow.dst, flow.src) if flow.direction == "down"
                        else (flow.src, flow.dst))
    mtu = probe(ctx.nodes[sender], address(ctx.plan, receiver, flow.family),
                max(frames.values()), flow.family)
    if mtu is None:
        return {}
    return {s: mtu for s, f in frames.items() if f > largest_frame(mtu)}


def _procedure(ctx: Context) -> Result:
    # Filled as it goes: an interrupted run stores what it holds (hoplab.run.execute).
    out = ctx.result
    for flow in ctx.test.flows:
        opts = flow.options_as(ThroughputOptions)
        too_big = _too_big(ctx, flow, opts.frame_sizes)
        for size in opts.frame_sizes:
            if size in too_big:
                # A size the path does not carry whole: its MTU, not a rate of 0.
                out.metrics.append(Metric("frame_over_mtu", too_big[size], "B",
                                          key=size))
                continue
            try:
                _one_size(ctx, flow, opts, size, out)
            except HoplabError as e:
                out.errors.append(f"flow {flow.name}, frames of {size}: {e}")
        if opts.trial_s < 60:
            # A queue of Q frames hides an excess of Q / trial frames/s (docs/kinds.md).
            out.notes["short_trials"] = f"{opts.trial_s:g}s trials (RFC 2544: 60s)"
    return out


def _unused_client(flow: Flow, index: int, plan: object) -> list[str]:
    raise HoplabError(f"flow {flow.name}: a throughput search runs its own trials")


KIND = register(Kind(
    name="throughput", options=OPTIONS, expand=_expand,
    figures=lambda _test, _outcomes, _end: ([], [], {}),
    headline=("ndr_fps", "ndr_bps", "pdr_fps", "pdr_bps", "generator_fps",
              "generator_limited", "frame_over_mtu"),
    metrics=METRICS, notes=("short_trials", "generator"), keyed="frames",
    flow=FlowTool(tool="iperf3", package="iperf3", bulk=True, rtt=False,
                  media_type="application/json", server=lambda _f, _i, _p: None,
                  client=_unused_client, collect=lambda *_a: None,
                  needs=(("ping", "iputils-ping"),), server_tool="nft"),
    procedure=_procedure,
    # 4: trials as RFC 2544 has them, none chosen among repeats (hoplab.record).
    measurement_version=4))
