"""Run one test on a lab that is up: servers, samplers, clients on one clock, then figures.

Order: every server is started and listening, and every client slow to start (a
browser) is up, before clock zero; the samplers take their first sample at clock
zero; each client starts (or, up already, is told to begin) at its flow's
offset. Whatever happens (a tool fails, Ctrl-C), every process started here
is stopped before this returns or raises.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from hoplab import kind_registry as registry
from hoplab.errors import HoplabError
from hoplab.kind_registry import BYTES_LIMIT_S
from hoplab.kinds import flow_tool, tcp_flows
from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import Outcome
from hoplab.kinds.procedure import Context, Result
from hoplab.lab.paths import flow_ends, routers_crossed
from hoplab.lab.plan import Plan
from hoplab.lab.state import find
from hoplab.nodes.executor import LOCAL_MACHINE, Executor
from hoplab.nodes.registry import close_all, executors, wire_executors
from hoplab.profile.phase import PhaseProfiler
from hoplab.record import Metric, RawOutput, Series
from hoplab.run import server_home
from hoplab.run.flows import client_argv, server_for, warm_argv
from hoplab.run.outcome import collect
from hoplab.run.procs import Proc, ProcessGroup, wait_listening, wait_ready
from hoplab.samplers import Samplers, Target, sampler_metrics
from hoplab.spec.experiment import Flow, Test

# How long past its planned end a client may run before it is stopped as hung.
GRACE_S = 15.0
# How long a client started before the clock (a browser) may take to be up.
WARM_TIMEOUT_S = 120.0


@dataclass
class TestResult:
    started_at: float
    duration_s: float = 0.0
    series: list[Series] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    raw: list[RawOutput] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None


def sampler_targets(test: Test, plan: Plan, nodes: Mapping[str, Executor]) -> list[Target]:
    asked = frozenset(test.samplers.kinds)
    kinds = asked - {"cpu"}
    # A flow's own TCP state is read where its data leaves, whichever nodes are watched.
    senders = tcp_flows.senders(test, plan) if "tcp_info" in kinds else {}
    if not kinds:
        # `cpu` alone: a namespace's CPU is the host's (sampled once, by the samplers'
        # cpu thread), but a device's is its own and read on the device.
        if "cpu" not in asked:
            return []
        chosen = (list(test.samplers.nodes) if test.samplers.nodes is not None
                  else routers_crossed(test, plan))
        return [Target(n, nodes[n], frozenset()) for n in chosen
                if nodes[n].machine != LOCAL_MACHINE]
    if test.samplers.nodes is not None:
        chosen = list(test.samplers.nodes)
        ends: list[str] = []
    else:
        chosen = routers_crossed(test, plan)
        # Retransmits happen at the senders: the ends keep a TCP counter.
        ends = flow_ends(test) if "tcp" in kinds else []
    node_kinds = kinds - {"wire", "tcp_info"}
    own: dict[str, frozenset[str]] = dict.fromkeys(chosen, node_kinds) if node_kinds else {}
    for n in ends:
        own.setdefault(n, frozenset({"tcp"}))
    for n in senders:
        own[n] = own.get(n, frozenset()) | {"tcp_info"}
    targets = [Target(n, nodes[n], k, tuple(senders.get(n, ()))) for n, k in own.items()]
    if "wire" in kinds:
        # Links carried by hoplab-wire: its frame and drop counters, per direction.
        targets += [Target(name, ex, frozenset({"wire"}))
                    for name, ex in wire_executors(find(plan.lab.name)).items()]
    return targets


def _deadline(flow: Flow, t0: float) -> float:
    if flow.duration_s is None:
        return t0 + flow.start_s + BYTES_LIMIT_S
    # A flow with a timeout of its own may run past its duration by it (its kind says).
    return (t0 + flow.start_s + flow.duration_s + GRACE_S + 0.1 * flow.duration_s
            + flow_tool(flow.kind).overrun(flow))


def _start_servers(test: Test, plan: Plan, group: ProcessGroup,
                   homes: list[server_home.Home]) -> None:
    """Start every flow's server; `homes` gets the directories made for servers with
    files of their own (removed by the caller once they have stopped)."""
    waits: dict[tuple[str, str], tuple[set[int], list[Proc]]] = {}
    for i, flow in enumerate(test.flows):
        server = server_for(flow, i, plan)
        if server is None:
            continue
        argv = server.argv
        if server.files is not None:
            if not plan.lab.node(server.node).node_kind.local:
                ex = group.nodes[server.node]
                where = PurePosixPath(f"/tmp/{group.workdir.name}-server-{i}")
                homes.append(server_home.Home(where, ex))
                files, argv = server.files(where)
                group.record.made_dir(server.node, str(where))
                server_home.place(ex, where, files)
            else:
                local = group.workdir / f"server-{i}"
                homes.append(server_home.Home(PurePosixPath(local), None))
                local.mkdir()
                files, argv = server.files(PurePosixPath(local))
                server_home.write_local(local, files)
        # A bulk flow's data starts its tool's clock: watched on both of its ends.
        proc = group.start(f"server {flow.name}", server.node, argv,
                           flow=flow.name if flow.bulk else None)
        ports, procs = waits.setdefault((server.node, server.proto), (set(), []))
        ports.add(server.port)
        procs.append(proc)
    for (node, proto), (ports, procs) in waits.items():
        wait_listening(group.nodes[node], proto, ports, procs)


def _go_file(group: ProcessGroup, index: int) -> Path:
    return group.workdir / f"go-{index}"


def _start_warm(test: Test, plan: Plan, group: ProcessGroup) -> dict[int, Proc]:
    """Start the clients slow to start (their kind's `warm`) and wait until each is up:
    before the clock, so that their start-up is not taken from the test's time."""
    warm: dict[int, Proc] = {}
    for i, flow in enumerate(test.flows):
        go = _go_file(group, i)
        argv = warm_argv(flow, i, plan, go)
        if argv is not None:
            # The runs of an experiment share a work directory: an earlier run's go would
            # start this client at once, with a time long gone.
            go.unlink(missing_ok=True)
            warm[i] = group.start(f"client {flow.name}", flow.src, argv)
    wait_ready(list(warm.values()), WARM_TIMEOUT_S)
    return warm


def _go(path: Path, at: float) -> None:
    """Tell a warm client to begin: the clock time of its flow's start, written whole."""
    part = path.with_name(path.name + ".part")
    part.write_text(f"{at:.6f}\n")
    part.replace(path)


def _run_clients(test: Test, plan: Plan, group: ProcessGroup, t0: float,
                 tick: Callable[[float], None], profiler: PhaseProfiler | None,
                 warm: Mapping[int, Proc]) -> tuple[list[tuple[Flow, Proc]], list[str]]:
    pending = sorted(enumerate(test.flows), key=lambda x: x[1].start_s)
    started: list[tuple[Flow, Proc]] = []
    errors: list[str] = []
    while pending or any(p.poll() is None for _, p in started):
        now = time.time()
        while pending and t0 + pending[0][1].start_s <= now:
            i, flow = pending.pop(0)
            if i in warm:
                _go(_go_file(group, i), t0 + flow.start_s)
                started.append((flow, warm[i]))
                continue
            started.append((flow, group.start(f"client {flow.name}", flow.src,
                                              client_argv(flow, i, plan),
                                              flow=flow.name if flow.bulk else None)))
        for flow, proc in started:
            if proc.poll() is None and time.time() > _deadline(flow, t0):
                errors.append(f"flow {flow.name}: {flow_tool(flow.kind).tool} did not finish "
                              f"in time; stopped")
                group.stop(proc)
        tick(now - t0)
        if profiler is not None:
            profiler.tick(time.time() - t0)
        time.sleep(0.05)
    return started, errors


def _fault(what: str, e: Exception) -> str:
    if isinstance(e, HoplabError):
        return f"{what}: {e}"
    return f"{what}: {type(e).__name__}: {e} (a fault in hoplab; the raw outputs are kept)"


def _collect(flow: Flow, proc: Proc, t0: float, window: tuple[float, float]) -> Outcome:
    """collect(), but a parser's fault fails the flow and keeps its raw output."""
    try:
        return collect(flow, proc, t0, window)
    except Exception as e:
        out = Outcome(flow)
        out.raw.append(RawOutput(f"{flow.name} {flow_tool(flow.kind).tool}", proc.output(),
                                 "text/plain"))
        out.error = _fault(f"flow {flow.name}", e)
        return out


def run_test(test: Test, plan: Plan, workdir: Path,
             tick: Callable[[float], None] = lambda _t: None,
             base_dir: Path | None = None,
             nodes: Mapping[str, Executor] | None = None,
             interrupted: Callable[[TestResult], None] | None = None) -> TestResult:
    """Run test on the lab of plan, whose nodes' executors are `nodes` (made here from
    the plan, and closed at the end, when not given). Interrupted, `interrupted` is
    given what the test had measured (a throughput search's trials) before the
    interrupt goes on."""
    own = nodes is None
    nodes = executors(plan) if nodes is None else nodes
    try:
        return _run_test(test, plan, workdir, tick, base_dir, nodes, interrupted)
    finally:
        if own:
            close_all(nodes)


def _stop(group: ProcessGroup, samplers: Samplers | None, profiler: PhaseProfiler | None,
          homes: list[server_home.Home]) -> None:
    """Stop everything a test started, whatever happened, and remove its servers' homes."""
    if profiler is not None:
        profiler.stop()
    if samplers is not None:
        samplers.stop()
    group.stop_all()
    for home in homes:
        if home.executor is None:
            shutil.rmtree(home.path, ignore_errors=True)
        else:
            server_home.remove(home)
            group.record.removed_dir(home.executor.node, str(home.path))


def _figures(test: Test, plan: Plan, result: TestResult, started: list[tuple[Flow, Proc]],
             errors: list[str], t0: float) -> None:
    """Each flow's outcome from its client's output, and the test's figures, into
    `result`, with the clients' errors first."""
    window = (test.load.start_s, test.load.end_s or result.duration_s)
    outcomes: list[Outcome] = [_collect(f, p, t0, window) for f, p in started]
    result.errors = errors + [o.error for o in outcomes if o.error] + result.errors
    for o in outcomes:
        result.series += o.series
        result.metrics += o.metrics
        result.raw += o.raw
    # What was measured (raw outputs, sampler series) is kept even when a figure cannot
    # be computed from it: the run is stored as failed with the error, and the raw
    # outputs let it be parsed again once the fault is fixed.
    try:
        series, metrics, notes = run_figures(test, outcomes, max(test.duration_s,
                                                                     result.duration_s))
        result.series += series
        result.metrics += metrics
        result.notes.update(notes)
        result.metrics += sampler_metrics(result.series, window=window)
        result.metrics += tcp_flows.rfc6349_metrics(test, plan, result.series, result.metrics,
                                                    window)
    except Exception as e:  # a fault in a figure must not lose the measurement
        result.errors.append(_fault("figures", e))


def _procedure(procedure: Callable[[Context], Result], test: Test, plan: Plan,
               group: ProcessGroup, result: TestResult, tick: Callable[[float], None]) -> None:
    """A kind's own procedure (a throughput search) in place of flows on a schedule."""
    ctx = Context(
        test=test, plan=plan, nodes=group.nodes, launcher=group,
        t0=result.started_at, tick=tick,
        listening=lambda node, proto, ports, procs: wait_listening(
            group.nodes[node], proto, ports, [p for p in procs if isinstance(p, Proc)]))
    try:
        out = procedure(ctx)
    except KeyboardInterrupt:
        _merge(result, ctx.result)  # what it measured before: the interrupted run's
        raise
    except Exception as e:
        result.errors.append(_fault(f"test {test.name}", e))
        return
    _merge(result, out)


def _merge(result: TestResult, out: Result) -> None:
    result.series += out.series
    result.metrics += out.metrics
    result.raw += out.raw
    result.errors += out.errors
    result.notes.update(out.notes)


def _run_test(test: Test, plan: Plan, workdir: Path, tick: Callable[[float], None],
              base_dir: Path | None, nodes: Mapping[str, Executor],
              interrupted: Callable[[TestResult], None] | None = None) -> TestResult:
    group = ProcessGroup(workdir, nodes, plan.lab.name)
    # The kind is asked once, before anything starts: its own procedure, or flows.
    procedure = registry.get(test.kind).procedure
    samplers: Samplers | None = None
    profiler = PhaseProfiler(test, test.profile, plan, nodes, workdir,
                             base_dir or Path.cwd()) if test.profile is not None else None
    homes: list[server_home.Home] = []
    try:
        warm: dict[int, Proc] = {}
        if procedure is None:
            _start_servers(test, plan, group, homes)
            warm = _start_warm(test, plan, group)
        samplers = Samplers(sampler_targets(test, plan, nodes),
                            cpu="cpu" in test.samplers.kinds,
                            clock_zero=0.0, interval_s=test.samplers.interval_s)
        # Opening a node's counters (a namespace entered, a device's session) takes time
        # the clients must not wait for: it comes before the clock starts.
        samplers.open()
        if profiler is not None:
            profiler.open()
        t0 = time.time()
        samplers.clock_zero = t0
        result = TestResult(started_at=t0)
        samplers.start()
        started: list[tuple[Flow, Proc]] = []
        errors: list[str] = []
        if procedure is not None:
            try:
                _procedure(procedure, test, plan, group, result, tick)
            except KeyboardInterrupt:
                if interrupted is not None:
                    result.duration_s = time.time() - t0
                    interrupted(result)
                raise
        else:
            started, errors = _run_clients(test, plan, group, t0, tick, profiler, warm)
        result.duration_s = time.time() - t0
        result.series += samplers.stop()
        result.errors += [f"sampler: {e}" for e in samplers.errors]
        if samplers.missing:
            # What a node could not give is said, never stored as zeros.
            result.notes["samplers_missing"] = "; ".join(samplers.missing)
    finally:
        _stop(group, samplers, profiler, homes)
    if procedure is not None:
        result.metrics += sampler_metrics(result.series, window=(0.0, result.duration_s))
    else:
        _figures(test, plan, result, started, errors, t0)
    if profiler is not None:
        prof = profiler.finish()
        result.raw += prof.raw
        result.metrics += prof.metrics
        result.profile = prof.metadata
    return result
