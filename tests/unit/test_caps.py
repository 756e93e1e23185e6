from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

from hoplab.cli import doctor
from hoplab.lab import caps as caps_mod
from hoplab.lab import requirements as requirements_mod
from hoplab.lab import wire as wire_mod
from hoplab.lab.caps import (
    FEATURE_NAMES,
    QDISC_NAMES,
    TOOL_NAMES,
    TOOL_PACKAGES,
    Capabilities,
)
from hoplab.lab.requirements import impairment_backend, requirements_problems
from hoplab.nodes.registry import in_namespace
from hoplab.spec.model import Direction, Lab, Link, Nat, Node, QueueLimit, Tunnel


def make_caps(*, qdiscs: dict[str, bool] | None = None, features: dict[str, bool] | None = None,
              missing_tools: tuple[str, ...] = ()) -> Capabilities:
    """Everything available, then the given overrides."""
    return Capabilities(
        kernel="6.1.0-test",
        qdiscs={q: True for q in QDISC_NAMES} | (qdiscs or {}),
        features={f: True for f in FEATURE_NAMES} | (features or {}),
        tools={t: None if t in missing_tools else "1.0" for t in TOOL_NAMES},
    )


NO_NETEM = {"netem": False}


def lab(*links: Link, nodes: tuple[Node, ...] = (), tunnels: tuple[Tunnel, ...] = ()) -> Lab:
    names = {n.name for n in nodes}
    extra = tuple(Node(name=x) for link in links for x in (link.a, link.b) if x not in names)
    return Lab(name="t", nodes=nodes + tuple(dict.fromkeys(extra)), links=links,
               tunnels=tunnels)


def link(i: int = 0, a: str = "r1", b: str = "r2", **kw: Any) -> Link:
    return Link(index=i, a=a, b=b, **kw)


DELAY = Direction(delay_s=0.01)
RATE = Direction(rate_bps=10_000_000)


# --------------------------------------------------------------------------- all present


def test_everything_available_no_problems() -> None:
    the_lab = lab(
        link(0, forward=Direction(delay_s=0.01, jitter_s=0.001, loss_pct=1.0, rate_bps=10**7),
             reverse=Direction(qdisc="fq_codel"), wireguard=True),
        link(1, "r2", "r3", forward=Direction(qdisc="fifo", queue=QueueLimit(bytes=10_000))),
        nodes=(Node(name="r1", nat=Nat(out="eth0"), offloads=(("gro", False),)),),
        tunnels=(Tunnel(name="t0", a="r1", b="r3"),),
    )
    assert requirements_problems(the_lab, make_caps()) == []


# --------------------------------------------------------------------------- netem


@pytest.fixture
def no_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where hoplab-wire was never built."""
    monkeypatch.setattr(wire_mod, "binary", lambda: None)


@pytest.fixture
def built_wire(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    exe = tmp_path / "hoplab-wire"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(wire_mod, "binary", lambda: exe)


@pytest.mark.usefixtures("built_wire")
def test_without_netem_impairments_go_to_the_wire() -> None:
    the_lab = lab(link(0), link(1, "r2", "r3", forward=DELAY))
    assert requirements_problems(the_lab, make_caps(qdiscs=NO_NETEM)) == []
    assert impairment_backend(the_lab.links[1], make_caps(qdiscs=NO_NETEM)) == "wire"


@pytest.mark.usefixtures("no_wire")
def test_wire_needed_but_not_built_names_the_link() -> None:
    the_lab = lab(link(0), link(1, "r2", "r3", forward=DELAY))
    problems = requirements_problems(the_lab, make_caps(qdiscs=NO_NETEM))
    assert len(problems) == 1
    p = problems[0]
    assert p.startswith("links[1] (r2 <-> r3):")
    assert "hoplab-wire is not built" in p and "make setup" in p


def test_netem_present_no_problem() -> None:
    assert requirements_problems(lab(link(forward=DELAY)), make_caps()) == []


@pytest.mark.parametrize("d", [Direction(delay_s=0.01), Direction(jitter_s=0.001),
                               Direction(loss_pct=0.5)])
def test_each_netem_impairment_needs_netem_when_asked_for(d: Direction) -> None:
    problems = requirements_problems(lab(link(reverse=d, emulator="netem")),
                                     make_caps(qdiscs=NO_NETEM))
    assert problems and "sch_netem" in problems[0]


def test_netem_both_directions_reported_once() -> None:
    problems = requirements_problems(lab(link(forward=DELAY, reverse=DELAY, emulator="netem")),
                                     make_caps(qdiscs=NO_NETEM))
    assert len(problems) == 1


def test_plain_or_rate_only_link_does_not_need_netem() -> None:
    the_lab = lab(link(0), link(1, "r2", "r3", forward=RATE))
    assert requirements_problems(the_lab, make_caps(qdiscs=NO_NETEM)) == []


def test_explicit_netem_emulator_message() -> None:
    problems = requirements_problems(lab(link(forward=DELAY, emulator="netem")),
                                     make_caps(qdiscs=NO_NETEM))
    assert len(problems) == 1
    assert 'emulator = "netem"' in problems[0] and "sch_netem" in problems[0]


def test_impairment_backend() -> None:
    caps = make_caps()
    assert impairment_backend(link(), caps) == "none"
    assert impairment_backend(link(forward=RATE), caps) == "tc"
    assert impairment_backend(link(reverse=Direction(qdisc="fq_codel")), caps) == "tc"
    assert impairment_backend(link(forward=DELAY), caps) == "netem"
    assert impairment_backend(link(forward=DELAY), make_caps(qdiscs=NO_NETEM)) == "wire"
    assert impairment_backend(link(forward=DELAY, emulator="netem"),
                              make_caps(qdiscs=NO_NETEM)) == "netem"
    assert impairment_backend(link(emulator="wire"), caps) == "wire"


def test_impairment_backend_auto_falls_back_to_wire_once_available(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requirements_mod, "WIRE_EMULATOR_AVAILABLE", True)
    no_netem = make_caps(qdiscs=NO_NETEM)
    assert impairment_backend(link(forward=DELAY), no_netem) == "wire"
    assert impairment_backend(link(forward=DELAY, emulator="netem"), no_netem) == "netem"
    assert impairment_backend(link(forward=DELAY), make_caps()) == "netem"


# --------------------------------------------------------------------------- qdiscs and rate


def test_requested_qdisc_missing() -> None:
    the_lab = lab(link(0, reverse=Direction(qdisc="fq_codel")))
    problems = requirements_problems(the_lab, make_caps(qdiscs={"fq_codel": False}))
    assert len(problems) == 1
    assert problems[0].startswith("links[0] (r1 <-> r2):")
    assert 'qdisc = "fq_codel"' in problems[0] and "sch_fq_codel" in problems[0]


def test_fifo_maps_to_pfifo_or_bfifo() -> None:
    only_pfifo = make_caps(qdiscs={"bfifo": False})
    assert requirements_problems(lab(link(forward=Direction(qdisc="fifo"))), only_pfifo) == []
    packets = Direction(qdisc="fifo", queue=QueueLimit(packets=100))
    assert requirements_problems(lab(link(forward=packets)), only_pfifo) == []
    nbytes = Direction(qdisc="fifo", queue=QueueLimit(bytes=100_000))
    problems = requirements_problems(lab(link(forward=nbytes)), only_pfifo)
    assert len(problems) == 1 and "bfifo" in problems[0]
    no_fifo = make_caps(qdiscs={"bfifo": False, "pfifo": False})
    problems = requirements_problems(lab(link(forward=Direction(qdisc="fifo"))), no_fifo)
    assert len(problems) == 1 and "pfifo or bfifo" in problems[0]


def test_rate_needs_htb() -> None:
    problems = requirements_problems(lab(link(forward=RATE)), make_caps(qdiscs={"htb": False}))
    assert len(problems) == 1
    assert "rate" in problems[0] and "htb" in problems[0] and "links[0]" in problems[0]


def test_rate_with_tbf_needs_tbf_not_htb() -> None:
    tbf = Direction(rate_bps=10**6, qdisc="tbf")
    assert requirements_problems(lab(link(forward=tbf)), make_caps(qdiscs={"htb": False})) == []
    problems = requirements_problems(lab(link(forward=tbf)), make_caps(qdiscs={"tbf": False}))
    assert len(problems) == 1 and "tbf" in problems[0]


# --------------------------------------------------------------------------- wireguard


NO_WG_KERNEL = {"wireguard_kernel": False}


def test_wireguard_without_kernel_nor_wireguard_go() -> None:
    caps = make_caps(features=NO_WG_KERNEL, missing_tools=("wireguard-go",))
    assert caps.wireguard_mode() is None
    problems = requirements_problems(lab(link(wireguard=True)), caps)
    assert len(problems) == 1
    assert problems[0].startswith("links[0] (r1 <-> r2): wireguard")
    assert "wireguard-go" in problems[0] and "apt-get install" in problems[0]


def test_wireguard_userspace_is_enough() -> None:
    caps = make_caps(features=NO_WG_KERNEL)
    assert caps.wireguard_mode() == "userspace"
    assert requirements_problems(lab(link(wireguard=True)), caps) == []


def test_wireguard_go_without_tun() -> None:
    caps = make_caps(features=NO_WG_KERNEL | {"tun": False})
    assert caps.wireguard_mode() is None
    problems = requirements_problems(lab(link(wireguard=True)), caps)
    assert len(problems) == 1 and "/dev/net/tun" in problems[0]


def test_wireguard_kernel_mode() -> None:
    caps = make_caps(features={"tun": False}, missing_tools=("wireguard-go",))
    assert caps.wireguard_mode() == "kernel"
    assert requirements_problems(lab(link(wireguard=True)), caps) == []


def test_tunnel_needs_wireguard() -> None:
    caps = make_caps(features=NO_WG_KERNEL, missing_tools=("wireguard-go",))
    the_lab = lab(link(0), link(1, "r2", "r3"), tunnels=(Tunnel(name="e2e", a="r1", b="r3"),))
    problems = requirements_problems(the_lab, caps)
    assert len(problems) == 1
    assert problems[0].startswith("tunnels[0] (e2e: r1 <-> r3)")


# --------------------------------------------------------------------------- nodes and base


def test_nat_missing_names_the_node() -> None:
    the_lab = lab(link(), nodes=(Node(name="gw", nat=Nat(out="r2")),))
    problems = requirements_problems(the_lab, make_caps(features={"nat": False}))
    assert len(problems) == 1
    assert problems[0].startswith("node gw: nat")
    problems = requirements_problems(the_lab, make_caps(features={"nat": False},
                                                        missing_tools=("nft",)))
    assert "nft" in problems[0] and "nftables" in problems[0]


def test_offloads_need_ethtool() -> None:
    the_lab = lab(link(), nodes=(Node(name="r1", offloads=(("gro", False),)),))
    problems = requirements_problems(the_lab, make_caps(missing_tools=("ethtool",)))
    assert len(problems) == 1
    assert problems[0].startswith("node r1: offloads") and "ethtool" in problems[0]
    assert requirements_problems(lab(link()), make_caps(missing_tools=("ethtool",))) == []


def test_base_requirements() -> None:
    caps = make_caps(features={"veth": False}, missing_tools=("ip", "tc"))
    problems = requirements_problems(lab(link()), caps)
    assert len(problems) == 3
    assert any("ip tool" in p and "iproute2" in p for p in problems)
    assert any("tc tool" in p for p in problems)
    assert any("veth" in p for p in problems)


def test_tool_packages() -> None:
    assert set(TOOL_PACKAGES) == set(TOOL_NAMES)
    assert TOOL_PACKAGES["ip"] == TOOL_PACKAGES["tc"] == "iproute2"
    assert TOOL_PACKAGES["ping"] == "iputils-ping"
    assert TOOL_PACKAGES["perf"] == "linux-perf"
    assert TOOL_PACKAGES["wg"] == "wireguard-tools"


# --------------------------------------------------------------------------- json and cache


def test_json_round_trip() -> None:
    caps = make_caps(qdiscs=NO_NETEM, missing_tools=("irtt",))
    data = json.loads(json.dumps(caps.to_json()))
    assert list(data) == ["kernel", "qdiscs", "features", "tools", "probe_s"]
    back = Capabilities.from_json(data)
    assert back == caps
    assert back.tools["irtt"] is None and back.has_qdisc("netem") is False


@pytest.mark.parametrize("bad", [
    {},
    {"kernel": 1, "qdiscs": {}, "features": {}, "tools": {}},
    {"kernel": "k", "qdiscs": {"netem": "yes"}, "features": {}, "tools": {}},
    {"kernel": "k", "qdiscs": {}, "features": [], "tools": {}},
    {"kernel": "k", "qdiscs": {}, "features": {}, "tools": {"ip": 1}},
])
def test_from_json_rejects_malformed(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Capabilities.from_json(bad)


def test_has_qdisc_unknown_is_false() -> None:
    assert Capabilities(kernel="k").has_qdisc("netem") is False
    assert Capabilities(kernel="k").wireguard_mode() is None


@pytest.mark.parametrize(("text", "version"), [
    ("ip utility, iproute2-6.1.0, libbpf 1.1.2", "6.1.0"),
    ("iperf 3.12 (cJSON 1.7.15)", "3.12"),
    ("ping from iputils 20221126", "20221126"),
    ("nftables v1.0.6 (Lester Gooch #5)", "1.0.6"),
    ("wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/", "1.0.20210914"),
    ("irtt version: 0.9.0", "0.9.0"),
    ("no digits here", "unknown"),
])
def test_parse_version(text: str, version: str) -> None:
    assert caps_mod._parse_version(text) == version


class FakeProbe:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Capabilities:
        self.calls += 1
        return make_caps(qdiscs=NO_NETEM)


@pytest.fixture
def fake_probe(monkeypatch: pytest.MonkeyPatch) -> FakeProbe:
    fake = FakeProbe()
    monkeypatch.setattr(caps_mod, "_probe_fresh", fake)
    return fake


def test_cache_reused_and_refreshed(tmp_path: Path, fake_probe: FakeProbe) -> None:
    path = tmp_path / "sub" / "caps.json"
    first = caps_mod.probe(cache_path=path)
    assert fake_probe.calls == 1 and path.exists()
    assert caps_mod.probe(cache_path=path) == first
    assert fake_probe.calls == 1
    caps_mod.probe(refresh=True, cache_path=path)
    assert fake_probe.calls == 2


def test_cache_key_change_or_corruption_reprobes(tmp_path: Path, fake_probe: FakeProbe,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "caps.json"
    caps_mod.probe(cache_path=path)
    key = caps_mod._cache_key()
    monkeypatch.setattr(caps_mod, "_cache_key", lambda: key | {"boot_id": "other"})
    caps_mod.probe(cache_path=path)
    assert fake_probe.calls == 2
    caps_mod.probe(cache_path=path)
    assert fake_probe.calls == 2
    path.write_text("{not json")
    caps_mod.probe(cache_path=path)
    assert fake_probe.calls == 3


# --------------------------------------------------------------------------- doctor


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**({"json": False, "refresh": False} | kw))


def test_doctor_register() -> None:
    parser = argparse.ArgumentParser()
    doctor.register(parser.add_subparsers())
    args = parser.parse_args(["doctor", "--json", "--refresh"])
    assert args.func is doctor.run and args.json and args.refresh


def test_doctor_not_root(monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert doctor.run(_args()) == 2
    assert "root" in capsys.readouterr().err


@pytest.mark.usefixtures("built_wire")
@pytest.mark.parametrize(("missing", "code"), [((), 0), (("iperf3",), 1)])
def test_doctor_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                     missing: tuple[str, ...], code: int) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(doctor, "probe",
                        lambda refresh=False: make_caps(qdiscs=NO_NETEM, missing_tools=missing))
    assert doctor.run(_args(json=True)) == code
    rep = json.loads(capsys.readouterr().out)
    assert list(rep) == ["kernel", "qdiscs", "features", "tools", "wireguard", "impairments",
                         "essentials", "probe_s", "vm"]
    assert set(rep["vm"]) == {"available", "missing", "accel", "why"}
    # Without sch_netem, delay, jitter and loss are made by the userspace wire.
    assert rep["impairments"]["delay_jitter_loss"]["mechanism"] == "wire"
    assert rep["impairments"]["trace"]["mechanism"] == "wire"
    assert rep["impairments"]["rate"]["mechanism"] == "htb"
    assert rep["essentials"]["ok"] is (code == 0)
    if missing:
        assert rep["tools"]["iperf3"]["install"].endswith("install --no-install-recommends iperf3")


CAPS_CASES = {"everything": {}, "no netem": NO_NETEM, "no htb": {"htb": False},
              "no fifo": {"pfifo": False, "bfifo": False}}


@pytest.mark.parametrize("wired", [True, False])
@pytest.mark.parametrize("case", list(CAPS_CASES))
def test_doctor_says_what_a_lab_would_get(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          case: str, wired: bool) -> None:
    """Each impairment row of the doctor is what a lab link with that impairment gets:
    a mechanism exactly when the lab could be built, and then the same backend."""
    exe = tmp_path / "hoplab-wire"
    exe.write_text("#!/bin/sh\n")
    monkeypatch.setattr(wire_mod, "binary", lambda: exe if wired else None)
    caps = make_caps(qdiscs=CAPS_CASES[case])
    rows = doctor.report(caps)["impairments"]
    assert set(rows) == set(requirements_mod.IMPAIRMENT_SAMPLES)
    for key, d in requirements_mod.IMPAIRMENT_SAMPLES.items():
        the_link = link(forward=d)
        problems = requirements_problems(lab(the_link), caps)
        row = rows[key]
        assert (row["mechanism"] is None) == bool(problems), (key, row, problems)
        if problems:
            # The reason is the one `hoplab lab up` would give, not a paraphrase of it.
            assert row["note"] == "unavailable: " + problems[0].removeprefix(
                f"{the_link.label}: "), (key, row)
        elif impairment_backend(the_link, caps) in ("wire", "netem"):
            assert row["mechanism"] == impairment_backend(the_link, caps)


def test_doctor_table(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(doctor, "probe",
                        lambda refresh=False: make_caps(missing_tools=("irtt",)))
    assert doctor.run(_args()) == 0
    out = capsys.readouterr().out
    assert "netem" in out and "irtt" in out and "apt-get install" in out


# --------------------------------------------------------------------------- batch parsing


def _fake_run(batch_err: str, batch_rc: int, single_ok: set[str]) -> Any:
    def run(argv: list[str], stdin: str | None = None, ex: object = None) -> caps_mod._Result:
        if "-batch" in argv:
            return caps_mod._Result(batch_rc, "", batch_err)
        return caps_mod._Result(0 if argv[-1] in single_ok else 1, "", "")
    return run


def test_batch_parses_failed_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    err = "Error: Specified qdisc kind is unknown.\nCommand failed -:2\n"
    monkeypatch.setattr(caps_mod, "_run", _fake_run(err, 1, set()))
    assert caps_mod._batch(["tc"], ["a x", "b y", "c z"], in_namespace("probe", None)) \
        == [True, False, True]


def test_batch_falls_back_to_one_call_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(caps_mod, "_run", _fake_run("something odd", 1, {"x", "z"}))
    assert caps_mod._batch(["tc"], ["a x", "b y", "c z"], in_namespace("probe", None)) \
        == [True, False, True]


def test_a_browsers_version_comes_from_its_package_without_starting_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    answers = {"-S": "chromium: /usr/bin/chromium\n", "-W": "156.0.8078.79-1~deb12u1"}

    def run(argv: list[str], stdin: str | None = None) -> Any:
        ran.append(list(argv))
        if argv[0].endswith("dpkg-query"):
            return caps_mod._Result(0, answers[argv[1]], "")
        return caps_mod._Result(0, "Chromium 1.2.3 built on Debian", "")

    monkeypatch.setattr(caps_mod, "_run", run)
    monkeypatch.setattr(caps_mod, "_which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(os.path, "realpath", lambda p: p)
    assert caps_mod._tool_version("/usr/bin/chromium", "chromium") == "156.0.8078.79"
    assert all(a[0] == "/usr/bin/dpkg-query" for a in ran), ran
    # No package owns it (built by hand): then it is asked, as every other tool is.
    def unowned(argv: list[str], stdin: str | None = None) -> Any:
        if argv[0].endswith("dpkg-query"):
            return caps_mod._Result(1, "", "no path found matching pattern")
        return caps_mod._Result(0, "Chromium 1.2.3 built by hand", "")

    monkeypatch.setattr(caps_mod, "_run", unowned)
    assert caps_mod._tool_version("/usr/bin/chromium", "chromium") == "1.2.3"
