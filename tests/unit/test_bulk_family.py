"""`family = 6` on the iperf3 kinds (tcp, udp, rrul's bulk flows, a custom test's tcp and
udp flows): the flows carry it, and iperf3 is pointed at the destination's IPv6
address with -6, on namespaces and on a device; which nodes have IPv6 is known before
lab up (hoplab.spec.families.has_family), from the same rule the planner uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab.plan import plan_lab, unresolved
from hoplab.run.flows import client_argv, server_for
from hoplab.spec import load_lab_text
from hoplab.spec.experiment import Flow
from hoplab.spec.experiment_loader import load_experiment
from hoplab.spec.families import has_family
from tests.helpers.lab_text import chain3

DUT = (Path(__file__).resolve().parents[2] / "examples" / "devices" / "router-dut.toml"
       ).read_text()
DUT_V6 = DUT.replace('client = "192.168.10.2/24", router = "192.168.10.1"',
                     'client = ["192.168.10.2/24", "fd10::2/64"], '
                     'router = ["192.168.10.1", "fd10::1"]')


def flows(tmp_path: Path, lab: str, body: str) -> list[Flow]:
    (tmp_path / "lab.toml").write_text(lab)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n[[tests]]\nname = "t"\nfrom = "client"\n' + body)
    return list(load_experiment(path).variants[0].tests[0].flows)


def argv_of(lab_text: str, flow: Flow) -> list[str]:
    return client_argv(flow, 0, plan_lab(load_lab_text(lab_text, "lab.toml")))


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_family_6_points_iperf3_at_the_ipv6_address(tmp_path: Path, kind: str) -> None:
    lab = chain3("f")
    (flow,) = flows(tmp_path, lab, f'kind = "{kind}"\nto = "server"\nfamily = 6\n')
    assert flow.family == 6
    plan = plan_lab(load_lab_text(lab, "lab.toml"))
    argv = client_argv(flow, 0, plan)
    host = str(plan.node("server").primary6)
    assert argv[:3] == ["iperf3", "-c", host] and "-6" in argv and "-4" not in argv
    assert ("-u" in argv) is (kind == "udp")
    # The one-off server listens on every address of its node, both families.
    server = server_for(flow, 0, plan)
    assert server is not None and "-B" not in server.argv


def test_family_4_is_the_default(tmp_path: Path) -> None:
    (flow,) = flows(tmp_path, chain3("f"), 'kind = "tcp"\nto = "server"\n')
    argv = argv_of(chain3("f"), flow)
    assert flow.family == 4 and "-4" in argv and argv[2].count(".") == 3


def test_a_device_is_reached_at_its_own_ipv6_address(tmp_path: Path) -> None:
    (flow,) = flows(tmp_path, DUT_V6, 'kind = "udp"\nto = "router"\nfamily = 6\n')
    assert argv_of(DUT_V6, flow)[:3] == ["iperf3", "-c", "fd10::1"]


def test_rrul_and_custom_flows_carry_the_family(tmp_path: Path) -> None:
    rrul = flows(tmp_path, chain3("f"), 'kind = "rrul"\nto = "server"\nfamily = 6\n'
                                        'duration = "2s"\nflows = 1\nidle = "1s"\n')
    assert sorted(f.kind for f in rrul) == ["ping", "probe", "tcp", "tcp"]
    assert {f.family for f in rrul} == {6}
    for i, f in enumerate(rrul):
        assert "-6" in client_argv(f, i, plan_lab(load_lab_text(chain3("f"), "lab.toml")))
    custom = flows(tmp_path, chain3("f"),
                   'kind = "custom"\nto = "server"\n[[tests.flows]]\nkind = "tcp"\n'
                   'family = 6\n[[tests.flows]]\nkind = "udp"\n')
    assert [(f.kind, f.family) for f in custom] == [("tcp", 6), ("udp", 4)]


def test_family_is_checked(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        flows(tmp_path, chain3("f"), 'kind = "udp"\nto = "server"\nfamily = 5\n')
    assert exc.value.key == "tests[0].family" and "family is 4 or 6" in exc.value.message


@pytest.mark.parametrize(("lab", "node", "version", "has"), [
    (chain3("f"), "server", 6, True),
    (chain3("f", ipv6=False), "server", 6, False),
    (chain3("f", ipv6=False), "server", 4, True),
    (DUT, "client", 6, False),          # a cable carries the families its ends give
    (DUT, "router", 4, True),
    (DUT_V6, "client", 6, True),
    (DUT_V6, "router", 6, True),
    (DUT_V6, "server", 6, False),
    # Between two devices whose addresses SSH tells: known only at lab up.
    ('name = "x"\n[nodes.a]\nssh = "root@a"\n[nodes.b]\nssh = "root@b"\n'
     '[[links]]\nbetween = ["a", "b"]\n', "a", 6, None),
    # ... unless the file gives them.
    ('name = "x"\n[nodes.a]\nssh = "root@a"\n[nodes.b]\nssh = "root@b"\n'
     '[[links]]\nbetween = ["a", "b"]\naddresses = { a = "10.0.0.1/24", b = "10.0.0.2" }\n',
     "b", 6, False),
])
def test_has_family_agrees_with_the_plan(lab: str, node: str, version: int,
                                         has: bool | None) -> None:
    loaded = load_lab_text(lab, "lab.toml")
    assert has_family(loaded, node, version) is has
    if not unresolved(loaded):
        n = plan_lab(loaded).node(node)
        assert ((n.primary4 if version == 4 else n.primary6) is not None) is has
