"""Lab files naming a device by its labgrid place: the keys, and what they refuse."""

from __future__ import annotations

import pytest

from hoplab.errors import SpecError
from hoplab.spec import load_lab_text
from hoplab.spec.model import LabgridPlace

LAB = '''name = "x"
[nodes.c]
[nodes.r]
{node}
[[links]]
between = ["c", "r"]
attach = {{ c = "hl0" }}
addresses = {{ c = "192.168.10.2/24", r = "192.168.10.1" }}
'''


def error(node: str) -> str:
    with pytest.raises(SpecError) as err:
        load_lab_text(LAB.format(node=node), "lab.toml")
    assert err.value.exit_code == 2
    return str(err.value)


def test_a_place_is_a_device_whose_ssh_destination_comes_later() -> None:
    lab = load_lab_text(LAB.format(node='labgrid = "erx-3"\n'
                                        'labgrid_coordinator = "lg.lab:20408"\n'
                                        'ssh_options = { identity = "/k/id", jump = "me@bh" }\n'
                                        'sysctls = { "net.ipv4.ip_forward" = 1 }'),
                        "lab.toml")
    r = lab.node("r")
    assert r.labgrid == LabgridPlace(place="erx-3", coordinator="lg.lab:20408",
                                     identity="/k/id", jump="me@bh")
    assert r.ssh is None and r.kind == "ssh" and r.reached_by == "labgrid"
    assert [n.name for n in lab.devices()] == ["r"]
    assert lab.links[0].device_ends[0].node == "r"
    # The coordinator may be left to $LG_COORDINATOR.
    plain = load_lab_text(LAB.format(node='labgrid = "erx-3"'), "lab.toml").node("r")
    assert plain.labgrid == LabgridPlace(place="erx-3")


@pytest.mark.parametrize(("node", "where", "says"), [
    ('labgrid = "erx"\nssh = "root@h"', "lab.toml:5: nodes.r.ssh:", "not both"),
    ('labgrid = "erx"\nssh_options = { port = 22 }', "lab.toml:5: nodes.r.ssh_options.port:",
     "NetworkService gives the port"),
    ('labgrid = "erx"\nssh_options = { user = "x" }', "lab.toml:5: nodes.r.ssh_options.user:",
     "unknown key"),
    ('labgrid = "+TOKEN"', "lab.toml:4: nodes.r.labgrid:", "not a labgrid place's name"),
    ('labgrid = "a b"', "lab.toml:4: nodes.r.labgrid:", "not a labgrid place's name"),
    ("labgrid = 3", "lab.toml:4: nodes.r.labgrid:", "expected a string"),
    ('labgrid = "erx"\nlabgrid_coordinator = "-oProxy=x"',
     "lab.toml:5: nodes.r.labgrid_coordinator:", "HOST[:PORT]"),
    ('labgrid = "erx"\nlabgrid_coordinator = "h:99999"',
     "lab.toml:5: nodes.r.labgrid_coordinator:", "TCP port"),
    ('labgrid = "erx"\nlabgrid_coordinator = "2001:db8::1"',
     "lab.toml:5: nodes.r.labgrid_coordinator:", "in brackets"),
    ('labgrid_coordinator = "lg:20408"', "lab.toml:4: nodes.r.labgrid_coordinator:",
     'needs labgrid = "PLACE"'),
    ('labgrid = "erx"\nforward = true', "lab.toml:5: nodes.r.forward:",
     "not for a device (nodes.r.labgrid)"),
])
def test_bad_labgrid_keys_name_file_line_and_key(node: str, where: str, says: str) -> None:
    msg = error(node)
    assert msg.startswith(where), msg
    assert says in msg, msg


@pytest.mark.parametrize("value", ["lg", "lg.lab:20408", "10.0.0.1:1", "[2001:db8::1]:20408",
                                   "[fe80::1%eth0]"])
def test_coordinators_as_labgrid_writes_them(value: str) -> None:
    got = load_lab_text(LAB.format(node=f'labgrid = "erx"\nlabgrid_coordinator = "{value}"'),
                        "lab.toml").node("r").labgrid
    assert got is not None and got.coordinator == value
