"""The throughput kind's options, read as a user writes them: errors name file, line and
key; defaults are RFC 2544's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.kinds.throughput import ThroughputOptions
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
