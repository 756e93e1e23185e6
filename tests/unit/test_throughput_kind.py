"""The throughput kind's options, read as a user writes them: errors name file, line and
key; defaults are RFC 2544's."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from hoplab.errors import SpecError
from hoplab.kinds import path_mtu
from hoplab.kinds.throughput import ThroughputOptions
from hoplab.record import Metric, RunRecord
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.lab_text import chain3

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(tmp_path: Path, options: str, ipv6: bool = False) -> ThroughputOptions:
    (tmp_path / "lab.toml").write_text(chain3("tp", ipv6=ipv6))
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "ndr"\nkind = "throughput"\n'
        f'from = "client"\nto = "server"\n{options}')
    exp = load_experiment(tmp_path / "exp.toml")
    (flow,) = exp.variants[0].tests[0].flows
    return flow.options_as(ThroughputOptions)


def test_defaults_are_rfc_2544s(tmp_path):
    o = _load(tmp_path, "")
    assert o.frame_sizes == ("64", "128", "256", "512", "1024", "1280", "1518")
    assert (o.losses_pct, o.trial_s, o.drain_s, o.precision_pct, o.flows) == (
        (0.0,), 60.0, 2.0, 0.5, 1)


def test_imix_and_two_loss_targets(tmp_path):
    o = _load(tmp_path, 'frame_sizes = [64, "imix"]\nloss = ["0.5%", "0%"]\n')
    assert o.frame_sizes == ("64", "imix") and o.losses_pct == (0.0, 0.5)


@pytest.mark.parametrize(("line", "message"), [
    ("frame_sizes = [63]", "64 to 1518"),
    ("frame_sizes = [64, 64]", "without repeats"),
    ('frame_sizes = ["jumbo"]', "imix"),
    ('loss = "100%"', "below 100"),
    ("flows = 5000", "at most 1024"),
    ('trial = "50ms"', "100ms to 1h"),
    ('precision = "0%"', "0.01% to 50%"),
    ('direction = "sideways"', "up, down, both"),
])
def test_bad_options_name_file_line_and_key(tmp_path, line, message):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, line + "\n")
    text = str(e.value)
    assert message in text and "exp.toml" in text and line.split(" =")[0] in text
    assert ":7" in text  # the option's line


def test_ipv6_frames_start_at_78_bytes(tmp_path):
    with pytest.raises(SpecError, match="at least 78 bytes"):
        _load(tmp_path, "frame_sizes = [64]\nfamily = 6\n", ipv6=True)
    assert _load(tmp_path, "frame_sizes = [78]\nfamily = 6\n", ipv6=True).frame_sizes == ("78",)


def test_both_directions_are_one_search_of_both_at_once(tmp_path):
    (tmp_path / "lab.toml").write_text(chain3("tp", ipv6=False))
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "ndr"\nkind = "throughput"\n'
        'from = "client"\nto = "server"\ndirection = "both"\n')
    flows = load_experiment(tmp_path / "exp.toml").variants[0].tests[0].flows
    assert [(f.name, f.direction) for f in flows] == [("ndr", "both")]


def test_the_example_loads():
    exp = load_experiment(EXAMPLES / "router-throughput.toml")
    assert [v.values for v in exp.variants] == [{"wireguard": False}, {"wireguard": True}]


# ping -M do -s 1472 -c 2 -i 0.2 -W 1 server, from a client behind a WireGuard hop
# (captured in a lab: the router answers first, the sender's kernel then refuses).
PING_OVER_MTU = ("PING server (10.200.0.10) 1472(1500) bytes of data.\n"
                 "From r1 (10.200.0.2) icmp_seq=1 Frag needed and DF set (mtu = 1420)\n\n"
                 "--- server ping statistics ---\n2 packets transmitted, 0 received, +2 "
                 "errors, 100% packet loss, time 201ms\n",
                 "ping: local error: message too long, mtu=1420\n")


class _Pinger:
    node = "client"

    def __init__(self, out: tuple[str, str], code: int) -> None:
        self.out, self.code = out, code
        self.argv: list[str] = []

    def run(self, argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        self.argv = argv
        return subprocess.CompletedProcess(argv, self.code, *self.out)


def test_a_frame_over_the_paths_mtu_is_found_and_said_not_searched() -> None:
    # Issue 27: 1518-byte frames through a WireGuard hop failed the run ("Message too
    # long"); they now get the MTU they do not fit.
    ex = _Pinger(PING_OVER_MTU, 1)
    assert path_mtu.probe(ex, "10.200.0.10", 1518, 4) == 1420  # type: ignore[arg-type]
    # A 1518-byte frame is a 1500-byte IP packet: 1472 bytes of echo payload.
    assert ex.argv[ex.argv.index("-s") + 1] == "1472" and "do" in ex.argv
    assert path_mtu.largest_frame(1420) == 1438
    fits = _Pinger(("PING server 1472(1500) bytes\n2 packets transmitted, 2 received\n", ""), 0)
    assert path_mtu.probe(fits, "10.200.0.10", 1518, 4) is None  # type: ignore[arg-type]


def _ndr_run(status: str, metrics: list[Metric]) -> RunRecord:
    return RunRecord(experiment="e", test="ndr", kind="throughput", repetition=1,
                     variant={"wireguard": True}, labels={}, started_at=0.0,
                     status=status, metrics=metrics)  # type: ignore[arg-type]


def test_the_summary_and_plot_say_does_not_fit_and_keep_the_sizes_that_ran() -> None:
    from hoplab.render.plots_throughput import throughput
    from hoplab.render.summary import summary_rows, summary_table

    fits = [Metric("ndr_fps", 1e5, "frames/s", key="64"),
            Metric("generator_fps", 2e5, "frames/s", key="64")]
    over = Metric("frame_over_mtu", 1420.0, "B", key="1518")
    # A run that failed at another size keeps the sizes it measured.
    rows = {r["flow"]: r for r in summary_rows([_ndr_run("failed", [*fits, over])])}
    assert rows["64"]["figures"]["ndr_fps"]["median"] == 1e5
    assert rows["1518"]["figures"] == {"frame_over_mtu": {"median": 1420.0, "min": 1420.0,
                                                         "max": 1420.0, "n": 1}}
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(summary_table([_ndr_run("ok", [*fits, over])], "summary"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "does not fit MTU" in text and "1420 B" in text
    fig = throughput([_ndr_run("ok", [*fits, over])])
    said = [t.get_text() for t in fig.axes[0].texts]
    assert said == ["does not fit 1420"]
