"""The planner on labs with devices: the namespaces' routes go through the device's own
addresses; nothing is planned on a cable beyond what its ends have."""

from __future__ import annotations

from ipaddress import ip_network
from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab.plan import plan_lab, unresolved
from hoplab.spec import load_lab, load_lab_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "devices"


def test_router_dut_routes_through_the_router() -> None:
    plan = plan_lab(load_lab(EXAMPLES / "router-dut.toml"))
    client, server, router = plan.node("client"), plan.node("server"), plan.node("router")
    assert [(i.name, i.kind) for i in client.ifaces] == [("hl-c0", "nic")]
    assert [(i.kind, [str(a) for a in i.addrs]) for i in router.ifaces] == [
        ("device", ["192.168.10.1/24"]), ("device", ["192.168.20.1/24"])]
    assert [(r.dst, r.gateway, r.dev) for r in client.routes] == [
        (ip_network("192.168.20.0/24"), "192.168.10.1", "hl-c0")]
    assert [(r.dst, r.gateway, r.dev) for r in server.routes] == [
        (ip_network("192.168.10.0/24"), "192.168.20.1", "hl-s0")]
    # No IPv6 is planned on a cable whose ends give none.
    assert all(a.version == 4 for n in plan.nodes for i in n.ifaces for a in i.addrs)
    assert plan.path("client", "server") == ["client", "router", "server"]
    assert ("192.168.10.1", "router router-v4") in plan.hosts


def test_a_device_address_still_unknown_is_not_planned() -> None:
    lab = load_lab_text('name = "x"\n[nodes.a]\n[nodes.r]\nssh = "root@r"\n[[links]]\n'
                        'between = ["a", "r"]\nattach = { a = "hl0" }\n'
                        'addresses = { a = "10.0.0.1/24" }\n', "lab.toml")
    with pytest.raises(SpecError, match="not known yet"):
        plan_lab(lab)


@pytest.mark.parametrize(("addresses", "waits"), [
    ('{ a = "10.0.0.1/24", r = "10.0.0.2" }', False),   # the prefix is the namespace's
    ('{ a = "10.0.0.1/24" }', True),                     # the address SSH reaches
])
def test_what_waits_for_the_device(addresses: str, waits: bool) -> None:
    lab = load_lab_text('name = "x"\n[nodes.a]\n[nodes.r]\nssh = "root@r"\n[[links]]\n'
                        f'between = ["a", "r"]\nattach = {{ a = "hl0" }}\n'
                        f'addresses = {addresses}\n', "lab.toml")
    assert unresolved(lab) is waits


def test_between_two_devices_a_prefix_left_out_waits() -> None:
    lab = load_lab_text('name = "x"\n[nodes.a]\nssh = "root@a"\n[nodes.b]\nssh = "root@b"\n'
                        '[[links]]\nbetween = ["a", "b"]\n'
                        'addresses = { a = "10.0.0.1/24", b = "10.0.0.2" }\n', "lab.toml")
    assert unresolved(lab)
