"""A client slow to start (a browser) is started before the test's clock and begins at its
flow's offset: its start-up is not taken from the other flows' time.

A fresh-clone CI run had Chromium take 24.7 s to start in a 20 s test whose page loads
were to be timed while bulk uploads filled the link: it made no load at all. The runner
now starts such a client (its kind's FlowTool.warm) first, waits for its first line
(the browser is up), then starts the clock; at the flow's offset it writes the clock's
time into the client's go file, and the client's loads run from that time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from hoplab.errors import HoplabError
from hoplab.kind_registry import FlowTool, Kind, Option, Reader, register, unregister
from hoplab.kinds.flow import ClientTimes, Outcome
from hoplab.lab.plan import Plan, plan_lab
from hoplab.nodes.executor import Executor
from hoplab.nodes.fake import FakeExecutor, FakeProcess
from hoplab.run import execute
from hoplab.run.execute import run_test
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase, Test
from hoplab.spec.experiment_loader import load_experiment
from hoplab.spec.locate import Path as KeyPath
from tests.helpers.lab_text import chain3

# How long the test waits for the runner to reach a step, on a busy machine: generous,
# since it only bounds a failure's wait.
STEP_S = 30.0


@dataclass(frozen=True)
class Nothing:
    pass


def _expand(kind: str) -> Any:
    def expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
               path: KeyPath) -> tuple[list[Flow], list[Phase]]:
        assert src is not None and dst is not None
        return [Flow(name=name, kind=kind, src=src, dst=dst, start_s=o.get("start", 0.0),
                     duration_s=o.get("duration", 1.0), options=Nothing())], []
    return expand


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    pass


def _kind(name: str, warm: bool) -> Kind:
    def client(flow: Flow, index: int, plan: Plan) -> list[str]:
        return [name]

    def warm_argv(flow: Flow, index: int, plan: Plan, go: Path) -> list[str]:
        return [name, "--go", str(go)]

    return Kind(name=name, options={"duration": Option(ov.duration, "how long", "1s")},
                expand=_expand(name),
                figures=lambda _t, _o, _e: ([], [], {}), headline=(), metrics=(),
                flow=FlowTool(tool=name, package=name, bulk=False, rtt=False,
                              media_type="text/plain", server=lambda _f, _i, _p: None,
                              client=client, collect=_collect,
                              warm=warm_argv if warm else None))


@pytest.fixture
def kinds() -> Iterator[None]:
    register(_kind("slowpoke", warm=True))
    register(_kind("quick", warm=False))
    yield
    unregister("slowpoke")
    unregister("quick")


EXPERIMENT = """lab = "lab.toml"
[[tests]]
name = "mix"
kind = "custom"
duration = "1s"
samplers = { kinds = [] }
[[tests.flows]]
name = "page"
kind = "slowpoke"
from = "client"
to = "server"
start = "0.25s"
[[tests.flows]]
name = "bulk"
kind = "quick"
from = "client"
to = "server"
"""


def _setup(tmp_path: Path) -> tuple[Test, Plan, dict[str, FakeExecutor], Path]:
    (tmp_path / "lab.toml").write_text(chain3("warm", ipv6=False))
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    variant = load_experiment(tmp_path / "exp.toml").variants[0]
    (test,) = variant.tests
    plan = plan_lab(replace(variant.lab, name="warm"))
    # The clients run until the test ends them (returncode), not for a time.
    nodes = {n.name: FakeExecutor(n.name, runs_for=3600.0) for n in plan.nodes}
    workdir = tmp_path / "work"
    workdir.mkdir()
    return test, plan, nodes, workdir


def _wait(what: str, cond: Any) -> Any:
    deadline = time.monotonic() + STEP_S
    while not (got := cond()):
        assert time.monotonic() < deadline, f"the runner never {what}"
        time.sleep(0.005)
    return got


def _by(node: FakeExecutor, tool: str) -> FakeProcess | None:
    return next((p for p in node.started if p.argv[0] == tool), None)


def test_the_clock_starts_once_the_slow_client_is_up_and_it_begins_at_its_offset(
        tmp_path: Path, kinds: None) -> None:
    test, plan, nodes, workdir = _setup(tmp_path)
    client = nodes["client"]
    seen: dict[str, Any] = {}
    # The runs of an experiment share a work directory: an earlier run's go is there (it
    # started the next run's browser at once, with its time long gone: no load at all).
    (workdir / "go-0").write_text("1.0\n")

    def drive() -> None:
        slow = _wait("started the slow client", lambda: _by(client, "slowpoke"))
        # Still starting up: nothing else may start, whatever time passes.
        seen["quick before ready"] = _by(client, "quick")
        seen["ready"] = time.time()
        slow.out.write_text('{"tool": "slowpoke"}\n')
        go = workdir / "go-0"
        seen["go"] = float(_wait("wrote the go file", lambda: go.exists() and go.read_text()))
        quick = _wait("started the other client", lambda: _by(client, "quick"))
        slow.returncode = quick.returncode = 0

    driver = threading.Thread(target=drive)
    driver.start()
    as_executors: dict[str, Executor] = dict(nodes)
    result = run_test(test, plan, workdir, nodes=as_executors)
    driver.join(STEP_S)

    assert result.errors == []
    slow, quick = _by(client, "slowpoke"), _by(client, "quick")
    assert slow is not None and quick is not None and seen["quick before ready"] is None
    assert slow.argv == ["slowpoke", "--go", str(workdir / "go-0")]
    # The clock started after the client was up; the other flow after the clock.
    t0 = result.started_at
    assert slow.started < seen["ready"] <= t0 <= quick.started
    # Its go is the clock's time at its offset, written exactly, not when it was read.
    assert seen["go"] == pytest.approx(t0 + 0.25, abs=1e-6)
    assert list(workdir.glob("go-*.part")) == []


def test_a_slow_client_never_up_fails_the_test_naming_it_and_is_stopped(
        tmp_path: Path, kinds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "WARM_TIMEOUT_S", 0.2)
    test, plan, nodes, workdir = _setup(tmp_path)
    with pytest.raises(HoplabError, match=r"client mix\.page not ready within 0\.2 s"):
        run_test(test, plan, workdir, nodes=dict[str, Executor](nodes))
    (slow,) = nodes["client"].started
    assert slow.argv[0] == "slowpoke" and nodes["client"].stopped == [slow]


def test_a_slow_client_that_exits_before_it_is_up_fails_the_test_with_its_message(
        tmp_path: Path, kinds: None) -> None:
    test, plan, nodes, workdir = _setup(tmp_path)
    nodes["client"].runs_for = 0.0   # exits at once, having written only to stderr
    real_start = nodes["client"].start

    def start(name: str, argv: Any, **kw: Any) -> FakeProcess:
        proc = real_start(name, argv, **kw)
        proc.err.write_text("chromium: cannot open display\n")
        return proc

    nodes["client"].start = start  # type: ignore[method-assign]
    with pytest.raises(HoplabError, match="client mix.page exited before it was ready "
                                          r"\(exit 0\): chromium: cannot open display"):
        run_test(test, plan, workdir, nodes=dict[str, Executor](nodes))
