"""The test-kind registry: a kind is one module.

A toy kind defined here, a web page load with curl, is registered the way a kind
module registers itself; with nothing else changed, the loader accepts tests of
it (and flows of it in a custom test), the matrix knows its options, its figures
are what run_figures gives, and the summary shows its headline.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hoplab import kind_registry, kinds, metrics
from hoplab.errors import SpecError
from hoplab.kind_registry import FlowTool, Kind, Option, Reader
from hoplab.kinds.doc import option_table
from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import ClientTimes, Outcome, address
from hoplab.lab.plan import Plan
from hoplab.record import Metric, RunRecord, Series
from hoplab.render.summary import summary_rows, summary_table
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase, Test
from hoplab.spec.experiment_loader import load_experiment
from hoplab.spec.locate import Path as KeyPath
from hoplab.spec.units import parse_str
from tests.helpers.lab_text import chain3

LAB = chain3("c")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "experiment-format.md"

# --- the toy kind: everything a page-load kind is, in one place -----------------------

PAGE_METRICS = (metrics.MetricDef("page_load_median", "ms", "page load median", "lower"),
                metrics.MetricDef("page_load_max", "ms", "page load max", "lower"))


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: KeyPath) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return [Flow(name=name, kind="pageload", src=src, dst=dst, start_s=o.get("start", 0.0),
                 duration_s=o.get("duration", 10.0))], []


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    return ["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}\n",
            f"http://{address(plan, flow.dst, flow.family)}/"]


def _collect(out: Outcome, text: str, t0: float, client: ClientTimes,
             window: tuple[float, float]) -> None:
    times = [1000 * float(x) for x in text.split()]
    out.series.append(Series("page_load", "ms", [client.started - t0] * len(times), times,
                             flow=out.flow.name))


def _figures(test: Test, outcomes: Sequence[Outcome], end: float
             ) -> tuple[list[Series], list[Metric], dict[str, str]]:
    loads = sorted(v for o in outcomes for s in o.series if s.name == "page_load" for v in s.v)
    if not loads:
        return [], [], {}
    return [], [Metric("page_load_median", loads[len(loads) // 2], "ms"),
                Metric("page_load_max", loads[-1], "ms")], {}


PAGE_OPTIONS = {"url": Option(parse_str, "the page to load"),
                "duration": Option(ov.duration, "how long to load it again and again")}

PAGELOAD = Kind(
    name="pageload", options=PAGE_OPTIONS, expand=_expand, figures=_figures,
    headline=("page_load_median", "page_load_max"),
    metrics=tuple(d.name for d in PAGE_METRICS),
    flow=FlowTool(tool="curl", package="curl", bulk=False, rtt=False, media_type="text/plain",
                  server=lambda _f, _i, _p: None, client=_client, collect=_collect))

# ---------------------------------------------------------------------------------------


@pytest.fixture
def pageload() -> Iterator[Kind]:
    metrics.register(*PAGE_METRICS)
    kinds.register(PAGELOAD)
    yield PAGELOAD
    kinds.unregister("pageload")


def _load(tmp_path: Path, body: str, *sets: str) -> list[Test]:
    (tmp_path / "lab.toml").write_text(LAB)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n' + body)
    exp = load_experiment(path, sets)
    return [t for v in exp.variants for t in v.tests]


def test_the_loader_accepts_a_registered_kind(tmp_path: Path, pageload: Kind) -> None:
    (test,) = _load(tmp_path, '[[tests]]\nname = "web"\nkind = "pageload"\nfrom = "client"\n'
                              'to = "server"\nurl = "/index.html"\nduration = "3s"\n')
    assert test.kind == "pageload" and test.options["url"] == "/index.html"
    (flow,) = test.flows
    assert (flow.kind, flow.src, flow.dst, flow.duration_s) == ("pageload", "client",
                                                                "server", 3.0)
    assert not flow.bulk
    assert test.phases == (Phase("load", 0.0, 3.0),)


def test_its_options_are_checked_and_known_to_the_matrix(tmp_path: Path,
                                                          pageload: Kind) -> None:
    body = '[[tests]]\nname = "web"\nkind = "pageload"\nfrom = "client"\nto = "server"\n'
    with pytest.raises(SpecError, match=r"tests\[0\]\.urll.*unknown key"):
        _load(tmp_path, body + 'urll = "/"\n')
    # A bare matrix key must be some kind's option: url is one now.
    tests = _load(tmp_path, '[matrix]\nurl = ["/a", "/b"]\n' + body)
    assert [t.options.get("url") for t in tests] == ["/a", "/b"]


def test_a_custom_test_may_have_flows_of_it(tmp_path: Path, pageload: Kind) -> None:
    (test,) = _load(tmp_path, '[[tests]]\nname = "mix"\nkind = "custom"\nfrom = "client"\n'
                              'to = "server"\nduration = "2s"\n'
                              '[[tests.flows]]\nkind = "tcp"\n'
                              '[[tests.flows]]\nkind = "pageload"\nname = "web"\n')
    assert [(f.name, f.kind, f.duration_s) for f in test.flows] == [
        ("mix.tcp1", "tcp", 2.0), ("mix.web", "pageload", 2.0)]


def test_without_registering_it_the_kind_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"tests\[0\]\.kind.*not one of"):
        _load(tmp_path, '[[tests]]\nname = "web"\nkind = "pageload"\nfrom = "client"\n'
                        'to = "server"\n')


def test_its_figures_and_its_headline_in_the_summary(pageload: Kind) -> None:
    flow = Flow(name="web", kind="pageload", src="client", dst="server", duration_s=3.0)
    out = Outcome(flow)
    _collect(out, "0.412\n0.398\n0.951\n", t0=0.0, client=ClientTimes(0.0, None, None),
             window=(0.0, 3.0))
    test = Test(name="web", kind="pageload", src="client", dst="server", flows=(flow,),
                phases=(Phase("load", 0.0, 3.0),))
    _, figures, _ = run_figures(test, [out], 3.0)
    assert [(m.name, m.value) for m in figures] == [("page_load_median", 412.0),
                                                    ("page_load_max", 951.0)]
    run = RunRecord(experiment="e", test="web", kind="pageload", repetition=1, variant={},
                    labels={}, started_at=0.0, metrics=figures)
    (row,) = summary_rows([run])
    assert row["figures"]["page_load_median"]["median"] == 412.0
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(summary_table([run], "summary"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "page load median" in text and "page load max" in text
    assert "412" in text and "951" in text


def test_every_builtin_kind_declares_registered_metrics_and_headlines() -> None:
    assert kinds.names()[:6] == ("tcp", "udp", "ping", "probe", "rrul", "custom")
    assert kinds.flow_names()[:4] == ("tcp", "udp", "ping", "probe")
    for name in kinds.names():
        kind = kinds.get(name)
        for metric in (*kind.metrics, *kind.headline, *kind.flow_headline):
            assert metrics.find(metric) is not None, (name, metric)
        assert set(kind.headline) <= set(kinds.metrics_of(name)), name
    # A custom test's runs carry its own figures and every flow kind's.
    custom = kinds.metrics_of("custom")
    assert {"jain_index", "goodput", "loss", "rtt_p99", "web_load"} <= set(custom)
    assert "latency_increase" not in custom  # rrul's own, and rrul is not a flow kind


def test_registering_a_name_twice_differently_is_refused(pageload: Kind) -> None:
    with pytest.raises(ValueError, match="pageload registered twice"):
        kinds.register(Kind(name="pageload", options={}, expand=_expand, figures=_figures,
                            headline=(), metrics=()))


def test_the_registry_loads_the_builtin_kinds_when_first_asked() -> None:
    """Importing hoplab.kinds loads no kind (the command line stays quick); the first
    question, even from a layer below kinds, registers them all."""
    code = ("import sys, hoplab.kinds\n"
            "from hoplab import kind_registry\n"
            "assert not [m for m in sys.modules if m.startswith('hoplab.kinds.')], sys.modules\n"
            "print(' '.join(kind_registry.names()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.split() == ["tcp", "udp", "ping", "probe", "rrul", "custom", "web", "throughput",
                           "responsiveness"]


def test_asking_before_the_kinds_can_be_loaded_is_a_fault(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # What the lower layers would see if no front end had imported hoplab.kinds: an
    # error saying so, never an empty registry.
    monkeypatch.setattr(kind_registry, "_BUILTIN", None)
    monkeypatch.setattr(kind_registry, "_LOADER", None)
    with pytest.raises(RuntimeError, match=r"import hoplab\.kinds"):
        kind_registry.find("tcp")


@pytest.mark.parametrize("name", ["tcp", "udp", "ping", "probe", "rrul", "custom", "web",
                                  "throughput"])
def test_each_kinds_keys_are_documented_from_their_declaration(name: str) -> None:
    """docs/experiment-format.md has each kind's table of keys exactly as its declaration
    prints it (`python -m hoplab.kinds.doc`): a key added, renamed or redocumented in the
    kind's module and not in the docs fails here."""
    text = DOCS.read_text()
    heading = re.search(rf"^### `{name}`.*$", text, re.M)
    assert heading is not None, name
    rest = text[heading.end():]
    end = re.search(r"^##", rest, re.M)
    section = rest[:end.start()] if end else rest
    table = option_table(kinds.get(name))
    assert table in section, f"docs/experiment-format.md, {name}: expected\n{table}"
    assert len(table.splitlines()) == 2 + len(kinds.get(name).options)


FRONT_ENDS = {
    # The command line reads the file as a user's `hoplab run` does.
    "hoplab run": ("import os, sys\nos.geteuid = lambda: 0\n"
                   "from hoplab.cli.main import main\n"
                   "sys.exit(main(['run', sys.argv[1]]))\n"),
    # A bisection reads the experiment as it is at each commit.
    "bisect": ("import sys\nfrom pathlib import Path\n"
               "from hoplab.errors import HoplabError\n"
               "from hoplab.run.commits import Target, load_at\n"
               "p = Path(sys.argv[1])\n"
               "try:\n    load_at(p.parent, Target(p.name, 'goodput', {}, None, 1), 'abc')\n"
               "except HoplabError as e:\n    print(e, file=sys.stderr)\n    sys.exit(2)\n"),
}


@pytest.mark.parametrize("front", sorted(FRONT_ENDS))
def test_each_front_end_that_reads_tests_has_the_kinds(tmp_path: Path, front: str) -> None:
    """In a fresh interpreter (not this suite's, which has imported hoplab.kinds), a front
    end that reads an experiment gets the registry's answer, not its fault."""
    (tmp_path / "lab.toml").write_text(LAB)
    (tmp_path / "exp.toml").write_text('lab = "lab.toml"\n[[tests]]\nname = "t"\n'
                                       'kind = "tcpp"\nfrom = "client"\nto = "server"\n')
    proc = subprocess.run([sys.executable, "-c", FRONT_ENDS[front], str(tmp_path / "exp.toml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "not one of tcp, udp, ping, probe, rrul, custom, web" in proc.stderr, proc.stderr


def test_a_summarys_note_columns_are_labelled_never_raw_keys() -> None:
    for name in kinds.names():
        for note in kinds.get(name).notes:
            assert note in metrics.NOTE_LABELS, (name, note)
    run = RunRecord(experiment="e", test="ndr", kind="throughput", repetition=1, variant={},
                    labels={}, started_at=0.0,
                    metadata={"short_trials": "2s trials (RFC 2544: 60s)"},
                    metrics=[Metric("ndr_fps", 1e5, "frames/s", key="64")])
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(summary_table([run], "summary"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "trial length" in text and "short_trials" not in text
    assert "2s trials (RFC 2544: 60s)" in text
