"""Queue disciplines as a lab asks for them: qdisc_options (tc's names), which
emulator gets a discipline on which kernel, and what the wire and tc are told."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab.caps import Capabilities
from hoplab.lab.requirements import (
    discipline,
    impairment_backend,
    impairment_mechanism,
    link_disciplines,
    requirements_problems,
)
from hoplab.lab.shaping import tc_lines
from hoplab.lab.wire import direction_spec
from hoplab.samplers.wire import sojourn_edges_ms, sojourn_quantile
from hoplab.spec import load_lab
from hoplab.spec.model import Direction, Lab, Link, Node, QueueLimit

BARE = Capabilities(kernel="x", qdiscs={"htb": True, "pfifo": True, "bfifo": True, "tbf": True})
FULL = Capabilities(kernel="x", qdiscs={**BARE.qdiscs, "fq_codel": True, "sfq": True,
                                        "codel": True, "netem": True})


def _load(tmp_path: Path, link: str) -> Link:
    f = tmp_path / "q.toml"
    f.write_text('# t\nname = "q"\n[nodes.a]\n[nodes.b]\n'
                 f'[[links]]\nbetween = ["a", "b"]\n{link}\n')
    return load_lab(f).links[0]


def test_options_load_normalised(tmp_path: Path) -> None:
    lk = _load(tmp_path, 'rate = "20mbit"\nqdisc = "fq_codel"\n'
                         'qdisc_options = { target = "5ms", interval = "100ms", flows = 1024, '
                         'quantum = 1514, limit = 10240, memory_limit = "32MB", ecn = false, '
                         'ce_threshold = "1ms", keys = "src" }\n'
                         'reverse = { qdisc = "sfq", rate = "1mbit", '
                         'qdisc_options = { perturb = "5s", keys = "5-tuple" } }')
    opts = dict(lk.forward.qdisc_options)
    assert opts == {"target": 0.005, "interval": 0.1, "flows": 1024, "quantum": 1514,
                    "limit": 10240, "memory_limit": 32_000_000, "ecn": False,
                    "ce_threshold": 0.001, "keys": "src"}
    assert dict(lk.reverse.qdisc_options) == {"perturb": 5.0,
                                              "keys": "src,dst,proto,proto-src,proto-dst"}


@pytest.mark.parametrize(("text", "needle"), [
    ('qdisc = "fq_codel"\nqdisc_options = { perturb = "5s" }',
     r'q.toml:8: links\[0\].qdisc_options: perturb is not an option of qdisc = "fq_codel"'),
    ('qdisc_options = { target = "5ms" }', "target is not an option of no qdisc"),
    ('qdisc = "sfq"\nqdisc_options = { divisor = 1000 }', "divisor: expected a power of two"),
    ('qdisc = "sfq"\nqdisc_options = { keys = "src,port" }', "unknown flow key 'port'"),
    ('qdisc = "codel"\nqdisc_options = { tartget = "5ms" }', "unknown option 'tartget'"),
    ('qdisc = "codel"\nqdisc_options = { interval = "0ms" }', "interval: expected a time above 0"),
    ('qdisc = "sfq"\nqdisc_options = { ce_threshold = "1ms" }',
     'ce_threshold is not an option of qdisc = "sfq"'),
    # tc reads perturb as whole seconds ("sfq perturb 2.5": Illegal "perturb").
    ('qdisc = "sfq"\nqdisc_options = { perturb = "2500ms" }',
     r"perturb: expected whole seconds .*'2500ms'"),
    # codel's and sfq's limits count packets: a byte queue would be ignored.
    ('qdisc = "sfq"\nqueue = "100kb"', r'q.toml:8: links\[0\].queue: queue in bytes cannot bound '
                                       r'qdisc = "sfq"'),
    ('qdisc = "codel"\nqueue = "100kb"', 'queue in bytes cannot bound qdisc = "codel"'),
])
def test_bad_options_name_file_line_and_key(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle) as err:
        _load(tmp_path, text)
    assert err.value.exit_code == 2


def test_kernel_qdisc_when_it_has_it_else_the_wire() -> None:
    fq = Direction(rate_bps=20_000_000, qdisc="fq_codel")
    lk = Link(0, "a", "b", forward=fq)
    assert impairment_backend(lk, BARE) == "wire"
    assert impairment_backend(lk, FULL) == "tc"
    assert impairment_backend(Link(0, "a", "b", forward=fq, emulator="wire"), FULL) == "wire"
    assert impairment_mechanism(fq, BARE) == ("wire (fq_codel)", None)
    assert impairment_mechanism(fq, FULL) == ("htb + fq_codel", None)
    # Tunnel keys: tc's flow classifier has none, so even a full kernel uses the wire.
    tun = Direction(rate_bps=1_000_000, qdisc="fq_codel",
                    qdisc_options=(("keys", "tunnel-src"),))
    assert impairment_backend(Link(0, "a", "b", forward=tun), FULL) == "wire"


def _lab(*links: Link) -> Lab:
    return Lab("q", (Node("a"), Node("b")), links)


def test_what_neither_can_give_is_refused_naming_link_and_option() -> None:
    cake = Link(0, "a", "b", forward=Direction(rate_bps=10**6, qdisc="cake"))
    (p,) = [x for x in requirements_problems(_lab(cake), BARE) if "cake" in x]
    assert p.startswith("links[0] (a <-> b): qdisc = \"cake\"") and "sch_cake" in p
    assert "the userspace wire has fifo, codel, fq_codel and sfq" in p
    no_rate = Link(0, "a", "b", forward=Direction(qdisc="fq_codel"))
    assert any("in front of a rate" in x for x in requirements_problems(_lab(no_rate), BARE))
    wired = Link(0, "a", "b", emulator="wire", forward=Direction(qdisc="fq_codel"))
    assert any("needs a rate" in x for x in requirements_problems(_lab(wired), BARE))
    tun = Link(0, "a", "b", emulator="netem", forward=Direction(
        rate_bps=10**6, qdisc="sfq", qdisc_options=(("keys", "tunnel-src"),)))
    assert any("tunnel-" in x for x in requirements_problems(_lab(tun), FULL))
    hosts = Link(0, "a", "b", emulator="netem", forward=Direction(
        rate_bps=10**6, qdisc="fq_codel", qdisc_options=(("hosts", "src"),)))
    assert any("qdisc_options.hosts needs the userspace wire" in x
               for x in requirements_problems(_lab(hosts), FULL))
    auto = Link(0, "a", "b", forward=hosts.forward)
    assert impairment_backend(auto, FULL) == "wire"


def test_disciplines_as_status_shows_them() -> None:
    lk = Link(0, "a", "b", forward=Direction(
        rate_bps=20_000_000, qdisc="fq_codel",
        qdisc_options=(("ecn", False), ("keys", "src"), ("target", 0.005))),
        reverse=Direction(rate_bps=20_000_000, queue=QueueLimit(packets=100)))
    assert link_disciplines(lk, BARE) == {
        "emulator": "wire", "forward_queue": "fq_codel ecn off keys src target 5ms",
        "reverse_queue": "fifo 100 packets"}
    assert discipline(Direction()) == "-"
    assert discipline(Direction(rate_bps=1, qdisc="sfq", qdisc_options=(("perturb", 5.0),))) \
        == "sfq perturb 5s"


def test_wire_and_tc_are_told_the_same_options() -> None:
    d = Direction(rate_bps=20_000_000, qdisc="fq_codel", queue=QueueLimit(packets=1000),
                  qdisc_options=(("ce_threshold", 0.001), ("ecn", False), ("keys", "src,dst"),
                                 ("target", 0.005)))
    assert direction_spec(d, 3) == ("rate=20000000,queue_packets=1000,qdisc=fq_codel,"
                                    "ce_threshold=0.001,ecn=0,keys=src+dst,limit=1000,"
                                    "target=0.005,seed=3")
    lines = tc_lines("eth0", d)
    assert lines[2] == ("qdisc add dev eth0 parent 1:1 handle 10: fq_codel ce_threshold 1000us "
                        "noecn limit 1000 target 5000us")
    assert lines[3] == "filter add dev eth0 parent 10: handle 1 protocol all flow hash keys " \
                       "src,dst divisor 1024"


def test_sojourn_quantile_of_the_packets_between_two_reads() -> None:
    edges = sojourn_edges_ms()
    assert len(edges) == 561 and edges[49] == pytest.approx(5.0) and math.isinf(edges[-1])
    before = [0] * 10 + [5]
    after = [0] * 10 + [5] + [0] * 38 + [10] + [0] * 19 + [1]   # 10 at 4.9-5.0 ms, 1 at 7 ms
    assert sojourn_quantile(before, after, 0.5) == pytest.approx(5.0)
    assert sojourn_quantile(before, after, 1.0) == pytest.approx(7.0)
    assert sojourn_quantile(after, after, 0.5) is None


def test_a_problem_with_a_qdisc_points_at_its_line(tmp_path: Path) -> None:
    f = tmp_path / "q.toml"
    f.write_text('# t\nname = "q"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
                 'forward = { rate = "1mbit", qdisc = "cake" }\n')
    (p,) = [x for x in requirements_problems(load_lab(f), BARE) if "cake" in x]
    assert p.endswith(f"({f}:7: links[0].forward.qdisc)"), p


def test_wire_sampler_reads_the_discipline_counters(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from hoplab.lab.wire import netns_name
    from hoplab.samplers import wire as wire_samples

    monkeypatch.setattr(wire_samples, "LABS_DIR", tmp_path)
    (tmp_path / "q" / "wire").mkdir(parents=True)
    # The stats file as hoplab-wire writes it (wire/src/stats.rs), one direction busy.
    counters = {"received": 10, "passed": 8, "passed_bytes": 9000, "dropped_loss": 0,
                "dropped_queue": 1, "dropped_malformed": 0, "dropped_error": 0,
                "duplicated": 0, "queue_bytes": 3028, "queue_packets": 2, "held_bytes": 0,
                "held_packets": 0, "dropped_aqm": 4, "ecn_marked": 5, "ce_marked": 9,
                "flows_active": 3,
                "rehashes": 6, "sojourn_hist": [0, 7]}
    idle: dict[str, object] = {**dict.fromkeys(counters, 0), "sojourn_hist": []}
    (tmp_path / "q" / "wire" / "link2.json").write_text(
        json.dumps({"pid": 1, "started": 1.0, "time": 2.0, "forward": counters,
                    "reverse": idle}))
    got = wire_samples.read(netns_name("q", 2))
    assert {k: got["forward"][k] for k in ("wire.dropped_aqm", "wire.ecn_marked",
                                           "wire.ce_marked", "wire.flows_active",
                                           "wire.rehashes", "wire.queue_packets")} == {
        "wire.dropped_aqm": 4.0, "wire.ecn_marked": 5.0, "wire.ce_marked": 9.0,
        "wire.flows_active": 3.0, "wire.rehashes": 6.0, "wire.queue_packets": 2.0}
    assert got["reverse"]["wire.dropped_aqm"] == 0.0


def test_seed_004_examples_load() -> None:
    from hoplab.spec.experiment_loader import load_experiment

    examples = Path(__file__).resolve().parents[2] / "examples"
    assert load_experiment(examples / "sfq-perturb.toml").runs() == 2
    qos = load_experiment(examples / "qos-under-load.toml")
    assert qos.matrix == {"qos": ("off", "on")}
    assert {"unloaded", "bulk", "flood"} <= {t.name for t in qos.variants[0].tests}
    link = load_lab(examples / "sfq-uplink.toml").links[2]
    assert dict(link.forward.qdisc_options) == {"perturb": 5.0, "divisor": 4}
    assert link_disciplines(link, BARE)["forward_queue"] == "sfq divisor 4 perturb 5s"
