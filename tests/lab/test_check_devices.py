"""`hoplab check --devices`: a lab's devices reached over SSH, read-only, as `lab up`
checks them first (host keys, tools, addresses), and the congestion controls its tests
ask of their kernels; nothing written, on this machine or on them."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.helpers.device_labs import configure
from tests.helpers.devices import Device, Farm
from tests.helpers.lab import hoplab, namespaces, new_lab_name

pytestmark = pytest.mark.root
NAME = new_lab_name()


def _node(name: str, dev: Device) -> str:
    return (f'[nodes.{name}]\nssh = "root@{dev.address}"\nssh_options = {{ identity = '
            f'"{dev.farm.identity}", known_hosts = "{dev.farm.known_hosts}" }}\n')


def _files(tmp_path: Path, owrt: Device, board: Device, tests: str,
           accept: bool = False) -> Path:
    (tmp_path / "lab.toml").write_text(
        f'name = "{NAME}"\n' + ("accept_new_host_keys = true\n" if accept else "")
        + _node("owrt", owrt) + _node("board", board)
        + '[[links]]\nbetween = ["owrt", "board"]\n'
        + 'addresses = { owrt = "192.168.77.1", board = "192.168.77.2" }\n')
    (tmp_path / "exp.toml").write_text('lab = "lab.toml"\n' + tests)
    return tmp_path / "exp.toml"


def _cabled(first: Device, second: Device) -> None:
    """A cable between the two devices, 192.168.77.1/24 and .2/24, as their admin set it."""
    port = f"hlk{secrets.token_hex(2)}"
    first.cable("p77", port, netns=second.netns)
    for dev, iface, addr in ((first, "p77", "192.168.77.1/24"),
                             (second, port, "192.168.77.2/24")):
        configure(dev, ["ip", "addr", "add", addr, "dev", iface],
                  ["ip", "link", "set", iface, "up"])


def test_devices_are_asked_what_the_tests_need(device_farm: Farm, tmp_path: Path) -> None:
    owrt, board = device_farm.add("openwrt-like"), device_farm.add("linux-board")
    _cabled(owrt, board)
    host = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    missing = next(n for n in ("vegas", "htcp", "westwood") if n not in host)
    exp = _files(tmp_path, owrt, board,
                 '[[tests]]\nname = "p"\nkind = "ping"\nfrom = "owrt"\nto = "board"\n'
                 '[[tests]]\nname = "t"\nkind = "tcp"\nfrom = "board"\nto = "owrt"\n'
                 f'congestion = "{missing}"\n')
    known = device_farm.known_hosts.read_bytes()
    # Without --devices the files are fine: both ends of the tcp test are devices, whose
    # kernels only they can tell.
    plain = hoplab("check", str(exp), timeout=60)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    got = hoplab("check", "--devices", str(exp), timeout=120)
    assert got.returncode == 2, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    # BusyBox's ping on the OpenWrt-like device: lab up's own tool check says so.
    assert any(line.startswith(f"{tmp_path / 'lab.toml'}:") and "nodes.owrt.ssh" in line
               and "ping without per-reply timestamps" in line and "test 'p'" in line
               for line in lines), lines
    assert (f"{exp}:12: tests[1].congestion: congestion control '{missing}' is not "
            "available on device") in got.stdout
    assert device_farm.known_hosts.read_bytes() == known
    assert not any(NAME in n for n in namespaces())


def test_a_new_host_key_is_reported_never_written(device_farm: Farm, tmp_path: Path) -> None:
    board = device_farm.add("linux-board")
    stranger = device_farm.add("linux-board", known=False)
    _cabled(stranger, board)
    tests = '[[tests]]\nname = "t"\nkind = "tcp"\nfrom = "owrt"\nto = "board"\n'
    known = device_farm.known_hosts.read_bytes()
    exp = _files(tmp_path, stranger, board, tests)
    got = hoplab("check", "--devices", str(exp), timeout=120)
    assert got.returncode == 2 and "unknown host key" in got.stdout, got.stdout + got.stderr
    assert "nodes.owrt.ssh" in got.stdout
    # The lab trusts new keys: lab up would add it; check only says so.
    exp = _files(tmp_path, stranger, board, tests, accept=True)
    got = hoplab("check", "--devices", str(exp), timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "note: " in got.stdout and "lab up will add it" in got.stdout
    assert device_farm.known_hosts.read_bytes() == known
