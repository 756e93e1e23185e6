"""The wire's Python side without a kernel: lab keys, backend choice, arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab import wire
from hoplab.lab.plan import netns_name
from hoplab.lab.requirements import impairment_backend
from hoplab.lab.shaping import tc_lines
from hoplab.samplers import wire as wire_samples
from hoplab.spec import load_lab
from hoplab.spec.model import Direction, Link, QueueLimit


def _load(tmp_path: Path, link: str) -> Link:
    f = tmp_path / "w.toml"
    f.write_text('# t\nname = "w"\n[nodes.a]\n[nodes.b]\n'
                 f'[[links]]\nbetween = ["a", "b"]\n{link}\n')
    return load_lab(f).links[0]


def test_new_keys_load(tmp_path: Path) -> None:
    (tmp_path / "t.trace").write_text("1\n2\n")
    lk = _load(tmp_path, 'loss = "1%"\nloss_burst = 4\nduplicate = "0.5%"\n'
                         'forward = { trace = "t.trace", reorder = false }')
    assert lk.forward.loss_burst == 4.0 and lk.forward.duplicate_pct == 0.5
    assert lk.forward.trace == str(tmp_path / "t.trace")
    assert lk.forward.reorder is False and lk.reverse.reorder is None


@pytest.mark.parametrize(("text", "needle"), [
    ("loss_burst = 3", "loss_burst needs a loss"),
    ('trace = "missing.trace"', "cannot read trace file"),
    ("loss_burst = 0.5\nloss = 1", "1 frame or more"),
    ('rate = "1mbit"\ntrace = "t.trace"', "exclude each other"),
])
def test_bad_keys_name_the_key(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "t.trace").write_text("1\n")
    with pytest.raises(SpecError, match=needle):
        _load(tmp_path, text)


def test_bad_trace_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "t.trace").write_text("1\n5\n3\n")
    with pytest.raises(SpecError, match="line 3"):
        _load(tmp_path, 'trace = "t.trace"')


def test_wire_only_keys_pick_the_wire() -> None:
    lk = Link(0, "a", "b", forward=Direction(trace="/x"))
    from hoplab.lab.caps import Capabilities
    caps = Capabilities.__new__(Capabilities)
    assert impairment_backend(lk, caps) == "wire"


def test_direction_spec() -> None:
    d = Direction(rate_bps=50_000_000, delay_s=0.02, jitter_s=0.001, reorder=False,
                  loss_pct=1.0, loss_burst=3.0, duplicate_pct=0.5,
                  queue=QueueLimit(bytes=125_000))
    spec = wire.direction_spec(d, 7)
    assert spec == ("delay=0.02,jitter=0.001,reorder=0,loss=1.0,loss_burst=3.0,dup=0.5,"
                    "rate=50000000,queue_bytes=125000,seed=7")
    assert wire.direction_spec(Direction(), 1) == "seed=1"


def test_per_packet_directions() -> None:
    assert not wire.per_packet(Direction(delay_s=0.07))
    assert not wire.per_packet(Direction(rate_bps=10_000_000_000))
    assert wire.per_packet(Direction(rate_bps=50_000_000))
    assert wire.per_packet(Direction(loss_pct=1.0))


def test_netem_gets_gemodel_and_duplicate() -> None:
    (line,) = tc_lines("eth0", Direction(loss_pct=2.0, loss_burst=4.0, duplicate_pct=1.0))
    assert "loss gemodel" in line and "duplicate 1.0%" in line


def test_stats_path() -> None:
    p = wire_samples.stats_path(wire.netns_name("my-lab", 3))
    assert p.parts[-3:] == ("my-lab", "wire", "link3.json")
    # Lab `my` with a node named `lab-w` is no wire of lab `my-lab`.
    for not_a_wire in ("hoplab-lab-a", "hoplab-my-lab-w.3", netns_name("my-lab", "a"),
                       netns_name("my", "lab-w"), "hoplab-my-lab.3"):
        with pytest.raises(ValueError):
            wire_samples.stats_path(not_a_wire)
