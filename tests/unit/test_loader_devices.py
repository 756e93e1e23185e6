"""Lab files with devices: nodes over SSH, links cabled to them, device settings."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path
from textwrap import dedent

import pytest

from hoplab.errors import SpecError
from hoplab.spec import load_lab, load_lab_text
from hoplab.spec.model import DeviceEnd, Lab, SshTarget

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "devices"

DUT = '''\
name = "dut"
[nodes.client]
[nodes.server]
[nodes.router]
ssh = "root@10.99.0.2"
ssh_options = { port = 2222, identity = "/k/lab_ed25519", jump = "me@bastion:22" }
sysctls = { "net.core.rmem_max" = 4194304 }
offloads = { gro = false, lan1 = { gro = false, tso = true } }
setup = [["nft", "-f", "/etc/nat.nft"]]
teardown = ["nft flush ruleset"]

[[links]]
between = ["client", "router"]
attach = { client = "hl-c0" }
addresses = { client = "192.168.10.2/24", router = "192.168.10.1" }

[[links]]
between = ["router", "server"]
attach = { server = "hl-s0" }
addresses = { server = "192.168.20.2/24", router = "192.168.20.1" }
'''


def lab(text: str) -> Lab:
    return load_lab_text(dedent(text), "lab.toml")


def error(text: str) -> str:
    with pytest.raises(SpecError) as err:
        lab(text)
    assert err.value.exit_code == 2
    return str(err.value)


def test_the_issues_router_dut_file_loads_as_written() -> None:
    got = load_lab(EXAMPLES / "router-dut.toml")
    router = got.node("router")
    assert router.ssh is not None and router.ssh.destination == "root@10.99.0.2"
    assert router.ssh.user == "root" and router.ssh.host == "10.99.0.2"
    assert router.ssh.port == 22 and router.ssh.identity is not None
    assert router.ssh.identity.endswith("/.ssh/lab_ed25519") and "~" not in router.ssh.identity
    assert [n.name for n in got.devices()] == ["router"]
    first, second = got.links
    assert first.attach == (("client", "hl-c0"),) and first.nic("client") == "hl-c0"
    assert first.addr_a4 == IPv4Interface("192.168.10.2/24")
    # The device's address takes the prefix of the namespace end it shares a cable with.
    assert first.addr_b4 == IPv4Interface("192.168.10.1/24")
    assert first.device_ends == (DeviceEnd("router", IPv4Address("192.168.10.1"), 24),)
    assert second.addr_a4 == IPv4Interface("192.168.20.1/24")
    assert second.addr_b4 == IPv4Interface("192.168.20.2/24")
    assert first.addr_a6 is None and first.subnet6 is None


def test_device_settings_and_ssh_options() -> None:
    got = lab(DUT)
    router = got.node("router")
    assert router.ssh == SshTarget("root@10.99.0.2", 2222, "/k/lab_ed25519", "me@bastion:22")
    assert router.sysctls == (("net.core.rmem_max", "4194304"),)
    assert router.offloads == (("gro", False),)
    assert router.iface_offloads == (("lan1", "gro", False), ("lan1", "tso", True))
    assert router.setup == (("nft", "-f", "/etc/nat.nft"),)
    assert router.teardown == (("nft", "flush", "ruleset"),)
    assert not got.accept_new_host_keys


def test_a_host_alias_and_accepting_new_keys() -> None:
    got = lab('name = "x"\naccept_new_host_keys = true\n[nodes.a]\nssh = "exit-box"\n'
              '[nodes.b]\nssh = "root@2001:db8::7"\n')
    a = got.node("a").ssh
    assert got.accept_new_host_keys and a is not None and a.user is None and a.host == "exit-box"
    b = got.node("b").ssh
    assert b is not None and b.host == "2001:db8::7"


def test_a_device_end_with_no_address_is_left_to_ssh() -> None:
    got = lab('name = "x"\n[nodes.gw]\n[nodes.exit]\nssh = "root@10.99.0.9"\n'
              '[[links]]\nbetween = ["gw", "exit"]\nattach = { gw = "hl-x0" }\n'
              'addresses = { gw = "10.99.0.1/24" }\n')
    link = got.links[0]
    assert link.device_ends == (DeviceEnd("exit"),)
    assert link.addr_a4 == IPv4Interface("10.99.0.1/24") and link.addr_b4 is None


def test_all_devices_need_no_attach_and_no_addresses() -> None:
    got = lab('name = "x"\n[nodes.a]\nssh = "root@a"\n[nodes.b]\nssh = "root@b"\n'
              '[[links]]\nbetween = ["a", "b"]\n'
              '[[links]]\nbetween = ["a", "b"]\naddresses = { a = "192.168.10.1", '
              'b = "192.168.10.2/24" }\n')
    assert got.links[0].device_ends == (DeviceEnd("a"), DeviceEnd("b"))
    assert got.links[1].device_ends == (DeviceEnd("a", IPv4Address("192.168.10.1")),
                                        DeviceEnd("b", IPv4Address("192.168.10.2"), 24))


@pytest.mark.parametrize("value", [
    "-oProxyCommand=touch /tmp/pwned", "root@host;reboot", "root@$(reboot)", "a b",
    "root@-oProxyCommand=x", "`id`@host", "root@host\nreboot", "",
])
def test_a_hostile_ssh_destination_is_refused(value: str) -> None:
    msg = error(f'name = "x"\n[nodes.r]\nssh = {value!r}\n'.replace("'", '"')
                if "\n" not in value else 'name = "x"\n[nodes.r]\nssh = "root@h\\nreboot"\n')
    assert msg.startswith("lab.toml:3: nodes.r.ssh: ") and "not user@host" in msg


@pytest.mark.parametrize(("options", "key", "says"), [
    ('{ port = 0 }', "port", "not a TCP port"),
    ('{ port = "22" }', "port", "expected an integer"),
    ('{ identity = "-oProxyCommand=x" }', "identity", "file path"),
    ('{ identity = "/k/a key" }', "identity", "file path"),
    ('{ jump = "-J x" }', "jump", "jump host"),
    ('{ jump = "me@b;id" }', "jump", "jump host"),
    ('{ user = "root" }', "user", "unknown key"),
])
def test_bad_ssh_options_name_their_key(options: str, key: str, says: str) -> None:
    msg = error(f'name = "x"\n[nodes.r]\nssh = "root@h"\nssh_options = {options}\n')
    assert msg.startswith(f"lab.toml:4: nodes.r.ssh_options.{key}: ") and says in msg


@pytest.mark.parametrize(("body", "where", "says"), [
    # A namespace reaches a device only through a NIC cabled to it.
    ('[[links]]\nbetween = ["c", "r"]\naddresses = { c = "10.1.0.2/24" }\n',
     "lab.toml:6: links[0]:", 'add attach = { c = "NIC" }'),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { r = "eth0" }\n',
     "lab.toml:8: links[0].attach.r:", "r is a device"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "-ohoho" }\n',
     "lab.toml:8: links[0].attach.c:", "name of a network interface"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\n',
     "lab.toml:6: links[0].addresses:", "give c's address"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\naddresses = { c = "10.1.0.2" }\n',
     "lab.toml:9: links[0].addresses.c:", "needs a prefix length"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\n'
     'addresses = { c = "10.1.0.2/24", r = "10.2.0.1" }\n',
     "lab.toml:9: links[0].addresses.r:", "must be a different address in c's subnet"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\n'
     'addresses = ["10.1.0.2/24", "10.1.0.1/24"]\n',
     "lab.toml:9: links[0].addresses:", "name each end"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\nrate = "10mbit"\n'
     'addresses = { c = "10.1.0.2/24" }\n', "lab.toml:6: links[0]:", "does not shape"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\nwireguard = true\n'
     'addresses = { c = "10.1.0.2/24" }\n', "lab.toml:9: links[0].wireguard:", "not for a link"),
    ('[[links]]\nbetween = ["c", "x"]\nattach = { c = "hl0" }\n',
     "lab.toml:8: links[0].attach:", "one end of the link must be a device"),
    ('[[links]]\nbetween = ["c", "r"]\nattach = { c = "hl0" }\naddresses = { c = "10.1.0.2/24" }\n'
     '[[links]]\nbetween = ["x", "r"]\nattach = { x = "hl0" }\naddresses = { x = "10.2.0.2/24" }\n',
     "lab.toml:12: links[1].attach.x:", "hl0 is already attached by links[0]"),
])
def test_bad_cables_name_file_line_and_key(body: str, where: str, says: str) -> None:
    head = 'name = "x"\n[nodes.c]\n[nodes.x]\n[nodes.r]\nssh = "root@h"\n'
    msg = error(head + body)
    assert msg.startswith(where), msg
    assert says in msg, msg


@pytest.mark.parametrize(("node", "where", "says"), [
    ('forward = true', "nodes.r.forward", "net.ipv4.ip_forward"),
    ('nat = { out = "eth0" }', "nodes.r.nat", "setup command"),
    ('sysctls = { "kernel.panic" = 1 }', 'nodes.r.sysctls."kernel.panic"', "only net.*"),
    ('offloads = { grox = false }', "nodes.r.offloads.grox", "unknown offload"),
    ('offloads = { "bad/if" = { gro = false } }', 'nodes.r.offloads."bad/if"', "interface name"),
    ('offloads = { lan1 = { gro = "no" } }', "nodes.r.offloads.lan1.gro", "true or false"),
])
def test_what_a_device_may_not_be_asked(node: str, where: str, says: str) -> None:
    msg = error(f'name = "x"\n[nodes.r]\nssh = "root@h"\n{node}\n')
    assert f" {where}: " in msg and says in msg, msg


def test_ssh_options_without_ssh_and_tunnels_to_devices() -> None:
    msg = error('name = "x"\n[nodes.r]\nssh_options = { port = 22 }\n')
    assert msg.startswith("lab.toml:3: nodes.r.ssh_options: ") and "ssh =" in msg
    msg = error('name = "x"\n[nodes.a]\n[nodes.r]\nssh = "root@h"\n[[links]]\n'
                'between = ["a", "r"]\nattach = { a = "hl0" }\naddresses = { a = "10.0.0.1/24" }\n'
                '[[tunnels]]\nbetween = ["a", "r"]\n')
    assert "tunnels[0].between: r is a device" in msg


def test_namespace_links_take_addresses_by_node_name_too() -> None:
    got = lab('name = "x"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
              'addresses = { b = "10.9.0.2/30", a = "10.9.0.1/30" }\n')
    assert got.links[0].addr_a4 == IPv4Interface("10.9.0.1/30")
    assert got.links[0].addr_b4 == IPv4Interface("10.9.0.2/30")
    msg = error('name = "x"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
                'addresses = { a = "10.9.0.1/30" }\n')
    assert "links[0].addresses: give b's IPv4 address too" in msg


def test_a_jump_port_out_of_range_is_refused_at_its_line() -> None:
    """The SSH target refused port 99999 only at lab up, without a line."""
    for jump in ("me@bastion:99999", "bastion:0", "[2001:db8::1]:65536"):
        msg = error(f'name = "x"\n[nodes.r]\nssh = "root@h"\nssh_options = {{ jump = "{jump}" }}\n')
        assert msg.startswith("lab.toml:4: nodes.r.ssh_options.jump: "), msg
        assert "not a TCP port (1 to 65535)" in msg


def _loads(ssh: str, jump: str | None) -> bool:
    options = f'ssh_options = {{ jump = "{jump}" }}\n' if jump is not None else ""
    try:
        lab(f'name = "x"\n[nodes.r]\nssh = "{ssh}"\n{options}')
    except SpecError:
        return False
    return True


def _targets(ssh: str, jump: str | None) -> bool:
    from hoplab.nodes.ssh_target import SshTarget as Target
    from hoplab.nodes.ssh_target import SshTargetError
    try:
        Target(node="r", destination=ssh, jump=jump)
    except SshTargetError:
        return False
    return True


@pytest.mark.parametrize(("ssh", "jump", "good"), [
    ("root@[fe80::1%eth0]", None, True),        # a zone: the loader refused it
    ("root@fe80::1%eth0", None, True),
    ("root@2001:db8::7", None, True),
    ("root@[2001:db8::7]", "[fe80::2%br-lan]:2222", True),
    ("root@h", "me@bastion:22", True),
    ("root@h", "bastion", True),
    ("root@[fe80::1%eth0;id]", None, False),     # a zone is an interface name
    ("root@fe80::1%", None, False),
    ("root@[2001:db8::7", None, False),          # unbalanced: the loader took it
    ("root@2001:db8::7]", None, False),
    ("root@a:b", None, False),                   # ssh_target took any ':' in a name
    ("root@h", "2001:db8::7", False),            # bare IPv6 jump: is '7' a port?
    ("root@h", "bastion:99999", False),
    ("root@h", "-J x", False),
    ("x" * 33 + "@h", None, False),              # user names: 32 characters, as useradd
])
def test_the_loader_and_the_ssh_target_agree(ssh: str, jump: str | None, good: bool) -> None:
    """One validator (hoplab.nodes.ssh_address) for both: what the loader accepts, the
    SSH target accepts when lab up hands it over."""
    assert (_loads(ssh, jump), _targets(ssh, jump)) == (good, good)


def test_a_zone_reaches_the_target_without_brackets() -> None:
    got = lab('name = "x"\n[nodes.r]\nssh = "root@[fe80::1%eth0]"\n'
              'ssh_options = { jump = "[fe80::2%eth0]:22" }\n')
    node = got.node("r")
    assert node.ssh is not None
    from hoplab.nodes.ssh_target import SshTarget as Target
    target = Target.of("r", node.ssh)
    assert (target.user, target.host, target.jump) == ("root", "fe80::1%eth0",
                                                       "[fe80::2%eth0]:22")
