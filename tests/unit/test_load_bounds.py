"""Values no tool could take, and experiments too big to check, are refused at load with
file, line and key, and why (issue 18): each once reached a tool at `lab up` or a run
and failed there (exit 1), or kept the loader building flows for minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.spec import load_lab_text
from hoplab.spec import option_values as ov
from hoplab.spec.experiment_loader import load_experiment

CHAIN = """name = "c"
[nodes.client]
[nodes.r1]
[nodes.server]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "server"]
"""
TCP = '[[tests]]\nname = "t"\nkind = "tcp"\nfrom = "client"\nto = "server"\n'


def error(tmp_path: Path, body: str, lab: str = CHAIN) -> str:
    (tmp_path / "lab.toml").write_text(lab)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n' + body)
    with pytest.raises(SpecError) as exc:
        load_experiment(path)
    assert exc.value.exit_code == 2
    return str(exc.value)


def lab_error(body: str) -> str:
    with pytest.raises(SpecError) as exc:
        load_lab_text(CHAIN + body, "lab.toml")
    return str(exc.value)


@pytest.mark.parametrize(("option", "where", "says"), [
    ("flows = 129", "tests[0].flows", "at most 128 flows, got 129: iperf3"),
    ("flows = 1000000000", "tests[0].flows", "at most 128 flows"),
    ("cport = 65500\nflows = 40", "tests[0].cport", "need ports up to 65539"),
    ('duration = "99999h"', "tests[0].duration", "at most 24h"),
    ('rate = "99999999999999999999tbit"', "tests[0].rate", "at most 34tbit"),
    ("rate = 1e99", "tests[0].rate", "at most 34tbit"),
    ('congestion = "cubic; reboot"', "tests[0].congestion", "not a congestion control's name"),
    ('congestion = "x-y"', "tests[0].congestion", "not a congestion control's name"),
])
def test_a_test_option_past_its_tool_is_refused(tmp_path: Path, option: str, where: str,
                                                says: str) -> None:
    msg = error(tmp_path, TCP + option + "\n")
    assert msg.startswith(f"{tmp_path}/exp.toml:7: {where}: ") and says in msg, msg


def test_rrul_flows_and_ping_durations_are_bounded_too(tmp_path: Path) -> None:
    msg = error(tmp_path, TCP.replace("tcp", "rrul") + "flows = 200\n")
    assert "tests[0].flows: at most 128 flows" in msg
    msg = error(tmp_path, TCP.replace("tcp", "ping") + 'duration = "25h"\n')
    assert "tests[0].duration: a time is at most 24h" in msg


def test_a_congestion_control_this_kernel_lacks_is_refused(tmp_path: Path) -> None:
    host = ov.host_congestion()
    if host is None:
        pytest.skip("this machine's /proc has no tcp_available_congestion_control")
    missing = next(n for n in ("vegas", "htcp", "westwood", "illinois") if n not in host)
    msg = error(tmp_path, TCP + f'congestion = "{missing}"\n')
    assert msg.startswith(f"{tmp_path}/exp.toml:7: tests[0].congestion: congestion control "
                          f"'{missing}' is not available on this machine's kernel"), msg
    assert ", ".join(host) in msg
    # A custom test's flow is checked the same way, at its own key.
    msg = error(tmp_path, '[[tests]]\nname = "c"\nkind = "custom"\n[[tests.flows]]\n'
                          'kind = "tcp"\nfrom = "client"\nto = "server"\n'
                          f'congestion = "{missing}"\n')
    assert f"exp.toml:9: tests[0].flows[0].congestion: congestion control '{missing}'" in msg
    (tmp_path / "ok.toml").write_text(f'lab = "lab.toml"\n{TCP}congestion = "{host[0]}"\n')
    assert load_experiment(tmp_path / "ok.toml").variants[0].tests[0].flows[0].options


def test_the_kernels_module_files_count_as_available() -> None:
    got = ov.kernel_congestion("reno cubic\n", ["tcp_bbr.ko.xz", "tcp_vegas.ko", "xt_x.ko"])
    assert got == ("reno", "cubic", "bbr", "vegas")
    assert ov.congestion_missing("bbr", got, "k") is None
    assert "'dctcp' is not available on k, which has reno, cubic, bbr, vegas" in str(
        ov.congestion_missing("dctcp", got, "k"))


@pytest.mark.parametrize(("body", "where", "says"), [
    ("repeat = 1001\n" + TCP, "exp.toml:2: repeat", "repeat must be 1 to 1000"),
    ("repeat = 0\n" + TCP, "exp.toml:2: repeat", "repeat must be 1 to 1000"),
    ("repeat = 1000\n[matrix]\nflows = [" + ", ".join(map(str, range(1, 102))) + "]\n" + TCP,
     "exp.toml:2: repeat", "101000 runs (101 variants x 1 tests x 1000 repetitions); at most"),
    ("[matrix]\nflows = [" + ", ".join(map(str, range(1, 102))) + "]\n"
     '"tests.t.duration" = [' + ", ".join(f'"{i}s"' for i in range(1, 101)) + "]\n" + TCP,
     "exp.toml:2: matrix", "the matrix makes 10100 variants; at most 10000"),
    ("[matrix]\nhops = [5, 1000000000]\n" + TCP, "exp.toml:3: matrix.hops",
     "hops is at most 998, got 1000000000"),
])
def test_an_experiment_too_big_to_run_is_refused_before_it_is_built(
        tmp_path: Path, body: str, where: str, says: str) -> None:
    msg = error(tmp_path, body)
    assert f"{tmp_path}/{where}: " in msg and says in msg, msg


def test_a_custom_test_stops_at_the_flow_past_the_bound(tmp_path: Path) -> None:
    entry = '[[tests.flows]]\nkind = "tcp"\nfrom = "client"\nto = "server"\nflows = 128\n'
    msg = error(tmp_path, '[[tests]]\nname = "c"\nkind = "custom"\n' + entry * 9)
    assert ": tests[0].flows[8]: the flows so far are 1152; a test has at most 1024" in msg
    msg = error(tmp_path, TCP.replace("tcp", "ping") + "streams = ["
                + ", ".join(f'{{ name = "s{i}" }}' for i in range(1025)) + "]\n")
    assert "tests[0].streams: 1025 streams; a test has at most 1024 flows" in msg


def test_the_work_of_all_variants_together_is_bounded(tmp_path: Path) -> None:
    """A 1000-node lab in 101 variants: 201,899 nodes and links, past 200,000."""
    big = 'name = "big"\n[generate]\nchain = 998\n'
    msg = error(tmp_path, '[matrix]\n"tests.t.duration" = ['
                + ", ".join(f'"{i}s"' for i in range(1, 102)) + "]\n" + TCP, lab=big)
    assert f"{tmp_path}/exp.toml:2: matrix: this experiment is too big to check" in msg
    assert "more than 200000 nodes, links and flows" in msg


@pytest.mark.parametrize(("body", "where", "says"), [
    ('delay = "61s"\n', "lab.toml:9: links[1].delay", "a delay is at most 60s"),
    ('delay = "1s"\njitter = "99999h"\n', "lab.toml:10: links[1].jitter", "at most 24h"),
    ("queue = 99999999999999\n", "lab.toml:9: links[1].queue", "at most 1000000 packets"),
    ('rate = "99999999999999999999tbit"\n', "lab.toml:9: links[1].rate", "at most 34tbit"),
    ('rate = "1tbit"\nqdisc = "tbf"\n', "lab.toml:9: links[1].rate", "at most 687gbit"),
    ('qdisc = "codel"\nqdisc_options = { target = "2h" }\n',
     "lab.toml:10: links[1].qdisc_options", "at most 4294s"),
])
def test_a_link_value_past_tc_is_refused(body: str, where: str, says: str) -> None:
    msg = lab_error(body)
    assert msg.startswith(f"{where}: ") and says in msg, msg


def test_a_mesh_of_too_many_links_is_refused() -> None:
    """1000 nodes of degree 999 (499,500 links) took 10 s and 385 MB to load."""
    with pytest.raises(SpecError) as exc:
        load_lab_text('name = "m"\n[generate]\nmesh = { nodes = 1000, degree = 999 }\n',
                      "lab.toml")
    assert str(exc.value).startswith("lab.toml:3: generate.mesh.degree: 1000 nodes of "
                                     "average degree 999 make 499500 links; the limit is "
                                     "10000")
    assert len(load_lab_text('name = "m"\n[generate]\nmesh = { nodes = 1000, degree = 20 }\n',
                             "lab.toml").links) == 10000
