"""The examples in examples/devices/, as written, pointed at emulated devices.

A test cables emulated devices (tests.helpers.devices) as a person cables real
ones, configures them as their own admin would (addresses, forwarding), and
loads an example with only what differs on this machine replaced: each `ssh`
destination by the emulated device's, the key and known_hosts by the farm's, and
each host NIC name by one of this test's.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from tests.helpers.devices import Device, Farm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "devices"
_SSH = re.compile(r'^ssh = "([^"]+)".*$', re.M)
_SSH_OPTIONS = re.compile(r"^ssh_options = .*\n", re.M)


def adapt(text: str, devices: Mapping[str, Device], nics: Mapping[str, str] | None = None
          ) -> str:
    """`text` with each `ssh = "DEST"` whose DEST is a key of `devices` pointed at that
    device (its address, the farm's key and known_hosts) and each NIC renamed."""
    text = _SSH_OPTIONS.sub("", text)

    def ssh(m: re.Match[str]) -> str:
        dev = devices[m.group(1)]
        return (f'ssh = "root@{dev.address}"\n'
                f'ssh_options = {{ identity = "{dev.farm.identity}", '
                f'known_hosts = "{dev.farm.known_hosts}" }}')

    text = _SSH.sub(ssh, text)
    for old, new in (nics or {}).items():
        text = re.sub(rf'"{re.escape(old)}"', f'"{new}"', text)
    return text


def nic_names(*roles: str) -> dict[str, str]:
    """Fresh host NIC names (the kernel allows 15 bytes), one per role."""
    token = secrets.token_hex(2)
    return {role: f"hlc{token}{k}" for k, role in enumerate(roles)}


def cable_router(farm: Farm, nics: Mapping[str, str], kind: str = "linux-board") -> Device:
    """Seed 002's router under test: two ports, rt0 on 192.168.10.1/24 cabled to
    nics["hl-c0"] and rt1 on 192.168.20.1/24 cabled to nics["hl-s0"], forwarding, as
    its own configuration has it; the host ends are left down, as a free NIC is."""
    router = farm.add(kind)  # type: ignore[arg-type]
    for port, nic, addr in (("rt0", nics["hl-c0"], "192.168.10.1/24"),
                            ("rt1", nics["hl-s0"], "192.168.20.1/24")):
        router.cable(port, nic)
        configure(router, ["ip", "addr", "add", addr, "dev", port],
                  ["ip", "link", "set", port, "up"])
    configure(router, ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
    return router


def configure(dev: Device, *commands: list[str]) -> None:
    for argv in commands:
        done = dev.exec(*argv)
        assert done.returncode == 0, f"{dev.name}: {argv}: {done.stderr}"


def cable_boards(farm: Farm) -> dict[str, Device]:
    """Seed 003's three boards, cabled client - router - server, each port with the
    address its own configuration gives it (no routes, no forwarding: the lab file's
    setup commands and sysctls add those)."""
    boards = {role: farm.add("linux-board") for role in ("server", "router", "client")}
    token = secrets.token_hex(2)
    # A veth from the client board to the router board, and one from the router board to
    # the server board; the second end is moved into the neighbour's namespace.
    boards["client"].cable("eth5", f"hlr{token}4", netns=boards["router"].netns)
    boards["server"].cable("eth4", f"hlr{token}5", netns=boards["router"].netns)
    for role, port, addr in (("client", "eth5", "192.168.30.2/24"),
                             ("router", f"hlr{token}4", "192.168.30.1/24"),
                             ("router", f"hlr{token}5", "192.168.10.2/24"),
                             ("server", "eth4", "192.168.10.1/24")):
        configure(boards[role], ["ip", "addr", "add", addr, "dev", port],
                  ["ip", "link", "set", port, "up"])
    configure(boards["router"], ["sysctl", "-qw", "net.ipv4.ip_forward=0"])
    return boards


# The demo keys whose public halves examples/devices/mesh-exit.toml lists.
MESH_KEYS = {"gw": "eAy5/4sWMljMTCPJnjCTp2Go1vuRcJ9Tie/FYuQdyVA=",
             "relay": "oMoRR4wNSKU0fUQ6bWP+KuG98Pay5mg+AzLLWED7DW4=",
             "exit": "AFleUG1sEEopWPIVM4e6J+19DAyQEumAPCsv2JNCDVs="}


def cable_mesh(farm: Farm, nic: str) -> dict[str, Device]:
    """Seed 000's devices as mesh-exit.toml expects them: gw's port 192.168.50.1/24
    cabled to host NIC `nic`; underlay cables gw 172.16.1.1/30 - relay 172.16.1.2/30 and
    relay 172.16.2.1/30 - exit 172.16.2.2/30; each device's private key in /root/wg.key."""
    mesh = {role: farm.add("linux-board") for role in ("gw", "relay", "exit")}
    token = secrets.token_hex(2)
    mesh["gw"].cable("lan0", nic)
    mesh["gw"].cable("u0", f"hlu{token}1", netns=mesh["relay"].netns)
    mesh["exit"].cable("u0", f"hlu{token}2", netns=mesh["relay"].netns)
    for role, port, addr in (("gw", "lan0", "192.168.50.1/24"), ("gw", "u0", "172.16.1.1/30"),
                             ("relay", f"hlu{token}1", "172.16.1.2/30"),
                             ("relay", f"hlu{token}2", "172.16.2.1/30"),
                             ("exit", "u0", "172.16.2.2/30")):
        configure(mesh[role], ["ip", "addr", "add", addr, "dev", port],
                  ["ip", "link", "set", port, "up"])
    for role, dev in mesh.items():
        done = dev.exec("sh", "-c", 'umask 077; printf "%s\\n" "$1" > /root/wg.key', "sh",
                        MESH_KEYS[role])
        assert done.returncode == 0, done.stderr
    return mesh
