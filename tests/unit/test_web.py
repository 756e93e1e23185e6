"""The web kind: nginx's page, the pageload client's output (captured from real runs in
tests/data/pageload), the figures of a run's loads and the test keys."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from hoplab import kinds, metrics
from hoplab.errors import SpecError
from hoplab.kinds import web
from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import ClientTimes, Outcome
from hoplab.kinds.web import WebOptions
from hoplab.run.server_home import write_local
from hoplab.spec.experiment import Flow, Phase, Test
from hoplab.spec.experiment_loader import load_experiment
from hoplab.tools import ToolOutputError, nginx, pageload

DATA = Path(__file__).resolve().parents[1] / "data" / "pageload"
# The page the captures loaded: 4 objects of 20 kB (tests/data/README.md).
CAPTURED_SIZES = (20_000,) * 4


def _text(name: str) -> str:
    return (DATA / name).read_text()


# --- nginx's page ---------------------------------------------------------------------

def test_objects_are_svg_images_of_exactly_their_size(tmp_path: Path) -> None:
    write_local(tmp_path, nginx.files(tmp_path, 8080, (nginx.MIN_OBJECT, 1000, 50_000)))
    argv = nginx.argv(tmp_path)
    root = tmp_path / nginx.ROOT
    sizes = [len((root / nginx.object_name(i)).read_bytes()) for i in range(3)]
    assert sizes == [nginx.MIN_OBJECT, 1000, 50_000]
    body = (root / "o3.svg").read_bytes()
    assert body.startswith(b"<svg ") and body.endswith(b"--></svg>\n")
    assert body.count(b"--") == 2  # the padding never closes the comment early
    page = (root / nginx.PAGE).read_text()
    assert [f'src="o{i}.svg"' in page for i in (1, 2, 3)] == [True] * 3
    assert 'rel="icon" href="data:,"' in page  # no favicon request of its own
    assert nginx.page_bytes((nginx.MIN_OBJECT, 1000, 50_000)) == \
        len(page.encode()) + nginx.MIN_OBJECT + 51_000
    assert argv == ["nginx", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf"),
                    "-e", "stderr"]


def test_its_config_keeps_everything_in_its_directory(tmp_path: Path) -> None:
    conf = nginx.config(tmp_path, 8081, ipv6=False)
    assert "daemon off;" in conf and "listen 8081;" in conf and "gzip off;" in conf
    paths = [w.rstrip(";") for w in conf.split() if w.startswith("/")]
    assert paths and all(p.startswith(str(tmp_path)) for p in paths), paths
    assert "listen [::]:8081 ipv6only=on;" in nginx.config(tmp_path, 8081, ipv6=True)
    with pytest.raises(ValueError, match="at least"):
        nginx.svg(nginx.MIN_OBJECT - 1, seed=0)


# --- the client's output --------------------------------------------------------------

def test_parse_loads_over_a_50ms_link() -> None:
    res = pageload.parse(_text("ok_50ms.jsonl"))
    assert res.done and res.planned == 5 and res.browser == "Chromium 156.0.8078.79"
    assert [x.index for x in res.loads] == [1, 2, 3, 4, 5] and not res.failed
    first = res.loads[0]
    assert (first.status, first.objects, first.transfer_bytes) == (200, 4, 81838)
    assert first.ttfb_ms == pytest.approx(321.9) and first.load_ms == pytest.approx(868.7)
    # A fresh connection's first byte is a handshake and a request: two 100 ms RTTs.
    assert min(x.ttfb_ms or 0 for x in res.loads) >= 200.0
    # What crossed the wire: the page's bodies and five responses' HTTP headers.
    headers = (first.transfer_bytes or 0) - nginx.page_bytes(CAPTURED_SIZES)
    assert 5 * 150 <= headers <= 5 * 400, headers


def test_failed_loads_are_loads_not_errors() -> None:
    refused = pageload.parse(_text("refused.jsonl"))
    assert refused.done and len(refused.failed) == 2
    assert "ERR_CONNECTION_REFUSED" in (refused.loads[0].error or "")
    silent = pageload.parse(_text("no_answer.jsonl"))
    assert [x.error for x in silent.failed] == ["no load event within 2 s"] * 2
    missing = pageload.parse(_text("not_found.jsonl"))
    (load,) = missing.failed
    assert (load.status, load.error) == (404, "HTTP status 404")


def test_a_stopped_client_keeps_its_loads() -> None:
    res = pageload.parse(_text("killed.jsonl"))
    assert not res.done and res.planned == 20 and len(res.loads) == 1
    assert res.loads[0].ok


@pytest.mark.parametrize(("text", "message"), [
    ("", "no output"),
    ('{"tool": "iperf3"}\n', "first line is not its header"),
    ('{"tool": "pageload"}\nnot json\n{"done": true}\n', "line 2 is not JSON"),
    ('{"tool": "pageload"}\n{"load": 1, "ok": true}\n', "line 2: a load needs start"),
    ('{"tool": "pageload"}\n{"load": 1, "start": 1, "ok": true, "ttfb_ms": "x"}\n',
     "line 2: ttfb_ms is not a number"),
])
def test_parse_refuses_what_is_not_its_output(text: str, message: str) -> None:
    with pytest.raises(ToolOutputError, match=message):
        pageload.parse(text)


def test_argv_runs_this_module_with_the_plan() -> None:
    argv = pageload.argv("/py", pageload.Plan("http://10.0.0.2:8080/", 5, 30.0, 12.5))
    assert argv == ["/py", "-m", "hoplab.tools.pageload", "http://10.0.0.2:8080/",
                    "--loads", "5", "--timeout", "30", "--duration", "12.5"]
    with pytest.raises(ValueError):
        pageload.argv("/py", pageload.Plan("http://x/", 0, 30.0))
    # Started before the test's clock, it waits for the time in its go file.
    warm = pageload.argv("/py", pageload.Plan("http://x/", 1, 5.0, 3.0, "/w/go-2"))
    assert warm[-4:] == ["--duration", "3", "--go", "/w/go-2"]


# --- figures --------------------------------------------------------------------------

def _outcome(name: str, file: str, t0: float) -> Outcome:
    flow = Flow(name=name, kind="web", src="a", dst="b",
                options=WebOptions(objects=CAPTURED_SIZES, loads=5, timeout_s=10.0))
    out = Outcome(flow)
    kinds.flow_tool("web").collect(out, _text(file), t0, ClientTimes(t0, None, None),
                                   (0.0, 10.0))
    return out


def test_figures_are_the_distribution_of_the_completed_loads() -> None:
    res = pageload.parse(_text("ok_50ms.jsonl"))
    t0 = res.loads[0].start - 1.0
    ok = _outcome("page", "ok_50ms.jsonl", t0)
    assert ok.error is None
    (load,) = [s for s in ok.series if s.name == "web_load"]
    assert load.unit == "ms" and load.v == [x.load_ms for x in res.loads]
    assert load.t == pytest.approx([x.start - t0 for x in res.loads])
    assert load.t[0] == pytest.approx(1.0)
    loads = [x.load_ms or 0.0 for x in res.loads]
    ttfb = [x.ttfb_ms or 0.0 for x in res.loads]
    got = {m.name: m.value for m in ok.metrics}
    assert got["web_load"] == pytest.approx(statistics.median(loads))
    assert got["web_load_mean"] == pytest.approx(statistics.mean(loads))
    assert got["web_load_stddev"] == pytest.approx(statistics.stdev(loads))
    assert got["web_ttfb"] == pytest.approx(statistics.median(ttfb))
    assert (got["web_bytes"], got["web_loads"], got["web_failed"]) == (81838, 5, 0)
    assert all(m.flow == "page" for m in ok.metrics)
    for m in ok.metrics:
        assert metrics.lookup(m.name).unit == m.unit, m


def test_failed_loads_are_counted_and_the_run_figures_pool_the_flows() -> None:
    ok = _outcome("page", "ok_50ms.jsonl", 0.0)
    refused = _outcome("down", "refused.jsonl", 0.0)
    assert refused.error is None  # a page that does not load is a measurement
    assert {m.name: m.value for m in refused.metrics} == {"web_loads": 2, "web_failed": 2}
    (failed,) = [s for s in refused.series if s.name == "web_failed"]
    assert failed.v == [1.0, 1.0]
    test = Test(name="w", kind="web", src="a", dst="b", flows=(ok.flow, refused.flow),
                phases=(Phase("load", 0.0, 10.0),))
    _, found, _ = run_figures(test, [ok, refused], 10.0)
    pooled = {m.name: m.value for m in found if m.flow is None}
    assert (pooled["web_loads"], pooled["web_failed"]) == (7, 2)
    assert pooled["web_load"] == {m.name: m.value for m in ok.metrics}["web_load"]


def test_a_stopped_client_fails_its_flow_but_keeps_its_loads() -> None:
    out = _outcome("page", "killed.jsonl", 0.0)
    assert out.error == "flow page: the browser stopped after 1 of 20 loads"
    assert {m.name: m.value for m in out.metrics}["web_loads"] == 1


def test_a_browser_up_after_the_flows_time_makes_no_load_and_fails_its_flow() -> None:
    # Captured with `python -m hoplab.tools.pageload URL --loads 3 --duration 0.05`: the
    # browser came up after its duration. Before, it made one load anyway, after the other
    # flows had stopped, and it counted as a load made while they ran (CI: Chromium took
    # 24.7 s to start in a 20 s loaded test, and its one page read an idle link). hoplab
    # itself now starts the browser before the test's clock (--go, test_warm_clients.py);
    # this is the client run by hand.
    res = pageload.parse(_text("browser_after_the_end.jsonl"))
    assert res.done and res.loads == [] and res.planned == 3
    assert (res.launched_s, res.duration_s) == (0.559, 0.05)
    out = _outcome("page", "browser_after_the_end.jsonl", 0.0)
    assert out.error == ("flow page: no page load: the browser took 0.559 s to start, "
                         "the flow's whole 0.05 s")
    assert {m.name: m.value for m in out.metrics} == {"web_loads": 0, "web_failed": 0}


# --- test keys ------------------------------------------------------------------------

LAB = 'name = "w"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'


def _load(tmp_path: Path, body: str) -> list[Test]:
    (tmp_path / "lab.toml").write_text(LAB)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n[[tests]]\nname = "page"\n' + body)
    return [t for v in load_experiment(path, ()).variants for t in v.tests]


def test_keys_and_their_defaults(tmp_path: Path) -> None:
    (test,) = _load(tmp_path, 'kind = "web"\nfrom = "a"\nto = "b"\n')
    (flow,) = test.flows
    o = flow.options_as(WebOptions)
    assert (flow.kind, o.loads, o.timeout_s, flow.duration_s) == ("web", 10, 30.0, None)
    assert o.objects == (50_000,) * 10 and not flow.bulk
    (test,) = _load(tmp_path, 'kind = "web"\nfrom = "a"\nto = "b"\nobjects = 3\n'
                              'object_size = ["1kb", "2kib"]\nloads = 4\ntimeout = "5s"\n'
                              'duration = "20s"\n')
    (flow,) = test.flows
    o = flow.options_as(WebOptions)
    assert o.objects == (1000, 2048, 1000)
    assert (o.loads, o.timeout_s, flow.duration_s) == (4, 5.0, 20.0)
    (test,) = _load(tmp_path, 'kind = "web"\nfrom = "a"\nto = "b"\n'
                              'object_size = ["1kb", "2kb"]\n')
    # A list is the page's objects.
    assert test.flows[0].options_as(WebOptions).objects == (1000, 2000)


@pytest.mark.parametrize(("body", "message"), [
    ('object_size = "10b"\n', r"tests\[0\]\.object_size.*at least 75 bytes"),
    ("objects = 1001\n", r"tests\[0\]\.objects.*at most 1000"),
    ('timeout = "100ms"\n', r"tests\[0\]\.timeout.*at least 0.5s"),
    ('loads = 30\ntimeout = "20s"\n', r"tests\[0\]\.loads.*30 loads of up to 20 s"),
])
def test_bad_keys_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, 'kind = "web"\nfrom = "a"\nto = "b"\n' + body)


def test_a_custom_test_loads_pages_while_its_other_flows_run(tmp_path: Path) -> None:
    (test,) = _load(tmp_path, 'kind = "custom"\nduration = "8s"\n'
                              '[[tests.flows]]\nkind = "tcp"\nfrom = "a"\nto = "b"\n'
                              '[[tests.flows]]\nkind = "web"\nname = "page"\nfrom = "a"\n'
                              'to = "b"\nloads = 4\n')
    assert [(f.name, f.kind, f.duration_s) for f in test.flows] == [
        ("page.tcp1", "tcp", 8.0), ("page.page", "web", 8.0)]
    assert "web_load" in kinds.get("custom").flow_headline
    assert set(web.WEB_METRICS) <= set(kinds.metrics_of("custom"))


def test_the_report_timeline_marks_each_page_load() -> None:
    from hoplab.record import RunRecord
    from hoplab.render.charts import timeline

    out = _outcome("page", "ok_50ms.jsonl", 0.0)
    rec = RunRecord(experiment="e", test="page", kind="web", repetition=1, variant={},
                    labels={}, started_at=0.0, series=out.series, metrics=out.metrics)
    chart = timeline(rec)
    assert chart is not None
    traces = {t["name"]: t for t in chart.figure["data"]}
    load = traces["page page load"]
    assert load["mode"] == "markers" and len(load["y"]) == 5
    assert load["y"][0] == pytest.approx(868.7)
    assert "page first byte" in traces


def test_a_custom_summary_shows_page_loads_only_where_a_flow_loads_pages() -> None:
    import io

    from rich.console import Console

    from hoplab.record import Metric, RunRecord
    from hoplab.render.summary import summary_table

    def table(metrics: list[Metric]) -> str:
        run = RunRecord(experiment="e", test="t", kind="custom", repetition=1, variant={},
                        labels={}, started_at=0.0, metrics=metrics)
        buf = io.StringIO()
        Console(file=buf, width=200, color_system=None).print(summary_table([run], "summary"))
        return buf.getvalue()

    bulk = Metric("goodput", 4e6, "bit/s", flow="t.scp")
    page = _outcome("page", "ok_50ms.jsonl", 0.0).metrics
    assert "page load" not in table([bulk]) and "goodput" in table([bulk])
    text = table([bulk, *page])
    assert "page load" in text and "failed loads" in text and "goodput" in text


def test_the_server_may_be_a_device_the_browser_may_not(tmp_path: Path) -> None:
    import io
    import tarfile
    from pathlib import PurePosixPath
    from types import SimpleNamespace

    from hoplab.errors import HoplabError
    from hoplab.kinds.device_tools import test_tools
    from hoplab.lab.devices.tools import install_hint
    from hoplab.lab.plan import plan_lab
    from hoplab.run.server_home import tar_text
    from hoplab.spec import load_lab

    (tmp_path / "lab.toml").write_text(
        'name = "d"\n[nodes.a]\n[nodes.dev]\nssh = "root@dev"\n[[links]]\n'
        'between = ["a", "dev"]\nattach = { a = "eth9" }\n'
        'addresses = { a = "192.168.10.2/24", dev = "192.168.10.1/24" }\n')
    lab = load_lab(tmp_path / "lab.toml")
    plan = plan_lab(lab)
    tool = kinds.flow_tool("web")
    to_device = Flow(name="p", kind="web", src="a", dst="dev",
                     options=WebOptions(objects=(1000, 2000), loads=1))
    # nginx's files are made for where they will live on the device, and sent as one
    # archive that BusyBox's tar unpacks there.
    server = tool.server(to_device, 0, plan)
    assert server is not None and server.node == "dev" and server.files is not None
    home = PurePosixPath("/tmp/hoplab-run-1-x-server-0")
    files, argv = server.files(home)
    assert argv == ["nginx", "-p", f"{home}/", "-c", f"{home}/nginx.conf", "-e", "stderr"]
    assert f"root {home}/www;" in files["nginx.conf"].decode()
    with tarfile.open(fileobj=io.BytesIO(tar_text(files).encode()), mode="r") as tar:
        got = {m.name + "/" * m.isdir(): b"" if m.isdir() else
               (tar.extractfile(m) or io.BytesIO()).read() for m in tar.getmembers()}
    assert got == files and len(got["www/o2.svg"]) == 2000
    # What the device must have: nginx for the server (its packages named), not the
    # browser's Chromium.
    test = SimpleNamespace(name="page", flows=(to_device,))
    assert test_tools(lab, [test]) == ({"dev": {"nginx"}}, {"dev:nginx": "test 'page'"})
    assert install_hint("nginx") == ("opkg install nginx-ssl (or nginx-full) (OpenWrt) or "
                                     "apt-get install nginx (Debian, Ubuntu)")
    # The browser is driven by hoplab's own Python: a namespace node only.
    from_device = Flow(name="p", kind="web", src="dev", dst="a",
                       options=WebOptions(objects=(1000,), loads=1))
    with pytest.raises(HoplabError, match=r"dev is a device .* browser \(Chromium\)"):
        tool.client(from_device, 0, plan)
    assert "http://192.168.10.1:8080/" in tool.client(to_device, 0, plan)
