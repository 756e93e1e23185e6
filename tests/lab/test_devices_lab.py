"""Labs with devices, through the CLI as a person types it: examples/devices/router-dut.toml
against an emulated router; bad input refused before anything is touched; what a lab
changes on a device put back by lab down and by clean after a SIGKILL."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.lab.where import netns_prefix
from tests.helpers.device_labs import EXAMPLES, adapt, cable_router, configure, nic_names
from tests.helpers.devices import Device, Farm, farm
from tests.helpers.lab import HOPLAB, hoplab, namespaces

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def _sysfs(nic: str, name: str) -> str | None:
    try:
        return (Path("/sys/class/net") / nic / name).read_text().strip()
    except OSError:
        return None


def _dut(devices: Farm, tmp_path: Path, lab_name: str, extra: str = ""
         ) -> tuple[Path, Device, dict[str, str]]:
    nics = nic_names("hl-c0", "hl-s0")
    router = cable_router(devices, nics)
    text = adapt((EXAMPLES / "router-dut.toml").read_text(), {"root@10.99.0.2": router}, nics)
    text = text.replace('name = "dut"', f'name = "{lab_name}"')
    if extra:
        text = text.replace("[[links]]", extra + "\n[[links]]", 1)
    path = tmp_path / "router-dut.toml"
    path.write_text(text)
    return path, router, nics


def _global_addrs(dev: Device) -> list[str]:
    return [line.split()[3] for line in dev.exec("ip", "-o", "addr", "show").stdout.splitlines()
            if "scope global" in line]


def _read(dev: Device, path: str) -> str:
    got = dev.exec("cat", path)
    assert got.returncode == 0, got.stderr
    return got.stdout.strip()


def test_router_dut_up_and_down_as_written(devices: Farm, tmp_path: Path,
                                           lab_name: str) -> None:
    path, router, nics = _dut(devices, tmp_path, lab_name)
    before = _global_addrs(router)
    up = hoplab("lab", "up", str(path), "--json")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)
    assert summary["nodes"]["router"]["kind"] == "ssh"
    # The device's own interfaces, found by their addresses.
    assert [i["name"] for i in summary["nodes"]["router"]["interfaces"]] == ["rt0", "rt1"]
    client_ns = f"{netns_prefix(lab_name)}client"
    # The host NICs live in the ends' namespaces for the lab's life...
    assert _sysfs(nics["hl-c0"], "ifindex") is None
    inside = subprocess.run(["ip", "-n", client_ns, "-o", "addr", "show", "dev",
                             nics["hl-c0"]], capture_output=True, text=True, check=True)
    assert "192.168.10.2/24" in inside.stdout
    # ...routed through the device's addresses: the client reaches the server over it.
    route = subprocess.run(["ip", "-n", client_ns, "route", "get", "192.168.20.2"],
                           capture_output=True, text=True, check=True).stdout
    assert "via 192.168.10.1" in route
    # A second lab on the same NICs is told which lab holds them.
    other = tmp_path / "other.toml"
    other.write_text(path.read_text().replace(f'name = "{lab_name}"', 'name = "hlcother"'))
    busy = hoplab("lab", "up", str(other))
    assert busy.returncode == 2
    assert f"{nics['hl-c0']} is attached to lab '{lab_name}', which is up" in busy.stderr
    ping = hoplab("lab", "exec", lab_name, "client", "--", "ping", "-c2", "-W2", "server")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    # Nothing was configured on the device.
    assert _global_addrs(router) == before
    status = hoplab("lab", "status", "--json")
    assert status.returncode == 0, status.stderr
    mine = next(lab for lab in json.loads(status.stdout) if lab["name"] == lab_name)
    assert mine["nodes"]["router"]["kind"] == "ssh" and mine["problems"] == []
    _exec_on_the_device(lab_name, tmp_path, router)
    down = hoplab("lab", "down", lab_name)
    assert down.returncode == 0, down.stderr
    # ...and come back, down as they were, with no address.
    for nic in nics.values():
        assert _sysfs(nic, "ifindex") is not None, f"{nic} did not come back"
        assert int(_sysfs(nic, "flags") or "0", 16) & 1 == 0
    assert not any(n.startswith(netns_prefix(lab_name)) for n in namespaces())


def _exec_on_the_device(lab_name: str, tmp_path: Path, router: Device) -> None:
    """`hoplab lab exec LAB DEVICE -- CMD` over SSH: the argv quoted once (a hostile
    argument is data), output streamed before the command ends, input streamed to it,
    its exit status passed through; Ctrl-C stops the command on the device."""
    ran = tmp_path / "ran"
    hostile = f"a  b;$(touch {ran})`touch {ran}`"
    proc = subprocess.Popen([*HOPLAB, "lab", "exec", lab_name, "router", "--", "sh", "-c",
                             'printf "ready %s\\n" "$1"; read -r x; echo "got $x"; exit 7',
                             "sh", hostile], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # The first line arrives while the command still waits for its input.
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no output before the command's input was sent"
        assert proc.stdout.readline() == f"ready {hostile}\n".encode()
        out, err = proc.communicate(b"piped in\n", timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, out) == (7, b"got piped in\n"), err
    assert not ran.exists()
    # Ctrl-C at the terminal (SIGINT at its default, as from a shell): the command is
    # stopped on the device (sshd leaves it running when only its channel goes).
    before = router.pids()
    proc = subprocess.Popen([*HOPLAB, "lab", "exec", lab_name, "router", "--", "sh", "-c",
                             "echo up; exec sleep 60"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    try:
        assert select.select([proc.stdout], [], [], 30)[0] and proc.stdout.readline() == b"up\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert router.pids() <= before, [Path(f"/proc/{p}/cmdline").read_bytes()
                                     for p in router.pids() - before]


SETTINGS = '''sysctls = { "net.ipv4.tcp_ecn" = 1, "net.core.somaxconn" = 1234 }
offloads = { gro = false }
setup = [["ip", "route", "add", "198.51.100.0/24", "dev", "rt0"]]
teardown = [["ip", "route", "del", "198.51.100.0/24", "dev", "rt0"]]
'''


def _settings(router: Device) -> tuple[str, str, str, str]:
    gro = " ".join(router.exec("ethtool", "-k", "rt0").stdout.split("generic-receive-offload:")
                   [1].split()[:1])
    mark = "yes" if router.exec("ip", "route", "show", "198.51.100.0/24").stdout.strip() \
        else "no"
    return (_read(router, "/proc/sys/net/ipv4/tcp_ecn"),
            _read(router, "/proc/sys/net/core/somaxconn"), gro, mark)


def _with_settings(path: Path) -> None:
    text = path.read_text()
    head, tail = text.split("[[links]]", 1)
    path.write_text(head.rstrip() + "\n" + SETTINGS + "\n[[links]]" + tail)


def _with_ipv6(path: Path, router: Device) -> None:
    """Both families on both cables: the router's IPv6 addresses are its own (given
    without a prefix: it takes the namespace end's), and it forwards IPv6."""
    configure(router, ["ip", "addr", "add", "fd10::1/64", "dev", "rt0", "nodad"],
              ["ip", "addr", "add", "fd20::1/64", "dev", "rt1", "nodad"],
              ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])
    text = path.read_text()
    for net in ("10", "20"):
        end = "client" if net == "10" else "server"
        old = f'{{ {end} = "192.168.{net}.2/24", router = "192.168.{net}.1" }}'
        assert old in text
        text = text.replace(old, f'{{ {end} = ["192.168.{net}.2/24", "fd{net}::2/64"], '
                                 f'router = ["192.168.{net}.1", "fd{net}::1"] }}')
    path.write_text(text)


def test_device_settings_are_applied_and_put_back(devices: Farm, tmp_path: Path,
                                                  lab_name: str) -> None:
    path, router, _ = _dut(devices, tmp_path, lab_name)
    configure(router, ["ethtool", "-K", "rt0", "gro", "on"],
              ["sysctl", "-qw", "net.ipv4.tcp_ecn=2"])
    before = _settings(router)
    assert before[2:] == ("on", "no")
    _with_settings(path)
    _with_ipv6(path, router)
    up = hoplab("lab", "up", str(path))
    assert up.returncode == 0, up.stderr
    # IPv6 on the cables: the client's route to the server goes through the router's
    # IPv6 address, and a ping crosses it.
    route = subprocess.run(["ip", "-n", f"{netns_prefix(lab_name)}client", "-6", "route", "get",
                            "fd20::2"], capture_output=True, text=True, check=True).stdout
    assert "via fd10::1" in route, route
    ping = hoplab("lab", "exec", lab_name, "client", "--", "ping", "-6", "-c1", "-W3",
                  "fd20::2")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert _settings(router) == ("1", "1234", "off", "yes")
    state = json.loads(Path(f"/run/hoplab/labs/{lab_name}.json").read_text())
    assert state["devices"]["router"]["sysctls"] == [["net.ipv4.tcp_ecn", "2"],
                                                     ["net.core.somaxconn", before[1]]]
    down = hoplab("lab", "down", lab_name)
    assert down.returncode == 0 and "warning" not in down.stderr, down.stderr
    assert _settings(router) == before


def test_clean_after_sigkill_puts_the_device_and_nics_back(devices: Farm, tmp_path: Path,
                                                          lab_name: str) -> None:
    path, router, nics = _dut(devices, tmp_path, lab_name)
    configure(router, ["ethtool", "-K", "rt0", "gro", "on"],
              ["sysctl", "-qw", "net.ipv4.tcp_ecn=2"])
    before = _settings(router)
    _with_settings(path)
    # A process that builds the lab, then holds it (as `hoplab run` does) until killed.
    script = ("import sys, time\nfrom hoplab.lab import build\nfrom hoplab.spec import load_lab\n"
              "build.up(load_lab(sys.argv[1]))\nprint('up', flush=True)\ntime.sleep(600)\n")
    with subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE,
                          text=True) as owner:
        try:
            assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
            assert _settings(router) == ("1", "1234", "off", "yes")
        finally:
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait()
    clean = hoplab("clean", lab_name)
    assert clean.returncode == 0, clean.stderr
    assert _settings(router) == before
    for nic in nics.values():
        assert _sysfs(nic, "ifindex") is not None, f"{nic} did not come back"
    assert not any(n.startswith(netns_prefix(lab_name)) for n in namespaces())
    assert not Path(f"/run/hoplab/labs/{lab_name}.json").exists()


def _line(path: Path, needle: str) -> int:
    return next(k for k, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _refused(path: Path, *want: str) -> str:
    t0 = time.monotonic()
    got = hoplab("lab", "up", str(path))
    assert got.returncode == 2, (got.stdout, got.stderr)
    for w in want:
        assert w in got.stderr, got.stderr
    assert time.monotonic() - t0 < 30
    return got.stderr


def _untouched(lab_name: str, nics: dict[str, str]) -> None:
    assert not any(n.startswith(netns_prefix(lab_name)) for n in namespaces())
    assert not Path(f"/run/hoplab/labs/{lab_name}.json").exists()
    for nic in nics.values():
        assert _sysfs(nic, "ifindex") is not None


def test_bad_input_is_refused_before_anything_is_touched(devices: Farm, tmp_path: Path,
                                                         lab_name: str) -> None:
    path, router, nics = _dut(devices, tmp_path, lab_name)
    good = path.read_text()
    # A NIC that does not exist.
    path.write_text(good.replace(nics["hl-c0"], "hlnosuch0"))
    at = _line(path, "attach = { client")
    _refused(path, f"{path}:{at}: links[0].attach.client: no network interface 'hlnosuch0'")
    # A NIC that is up with an address in use.
    subprocess.run(["ip", "addr", "add", "10.254.77.1/24", "dev", nics["hl-s0"]], check=True)
    subprocess.run(["ip", "link", "set", nics["hl-s0"], "up"], check=True)
    try:
        path.write_text(good)
        at = _line(path, "attach = { server")
        _refused(path, f"{path}:{at}: links[1].attach.server: {nics['hl-s0']} is up with "
                       "addresses in use (10.254.77.1/24)")
    finally:
        subprocess.run(["ip", "addr", "flush", "dev", nics["hl-s0"]], check=True)
        subprocess.run(["ip", "link", "set", nics["hl-s0"], "down"], check=True)
    # An address the device does not have.
    path.write_text(good.replace('router = "192.168.20.1"', 'router = "192.168.20.9"'))
    at = _line(path, "192.168.20.9")
    _refused(path, f"{path}:{at}: links[1].addresses.router: 192.168.20.9 is not an address "
                   "of device router (it has: ")
    # Unreachable (nothing listens on that port) and unauthenticated (a key it does not know).
    path.write_text(good.replace("ssh_options = {", "ssh_options = { port = 2,"))
    err = _refused(path, f"{path}:{_line(path, 'ssh = ')}: nodes.router.ssh: device router "
                         f"(root@{router.address}): ")
    assert "keys" not in err and "refused" in err.lower(), err
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                   check=True)
    path.write_text(good.replace(str(devices.identity), str(stranger)))
    err = _refused(path, f"{path}:{_line(path, 'ssh = ')}: nodes.router.ssh: device router")
    assert "refused our keys" in err, err
    _untouched(lab_name, nics)
    # A tool the lab needs that the device lacks: an OpenWrt-like router has no ethtool.
    owrt_nics = nic_names("hl-c0", "hl-s0")
    owrt = cable_router(devices, owrt_nics, kind="openwrt-like")
    text = adapt((EXAMPLES / "router-dut.toml").read_text(), {"root@10.99.0.2": owrt},
                 owrt_nics).replace('name = "dut"', f'name = "{lab_name}"')
    path.write_text(text.replace("[[links]]", "offloads = { gro = false }\n[[links]]", 1))
    _refused(path, "nodes.router.ssh: device router lacks ethtool, which this lab needs: "
                   "opkg install ethtool (OpenWrt) or apt-get install ethtool")
    _untouched(lab_name, owrt_nics)


def test_sigkill_during_a_device_setup_command_then_clean(devices: Farm, tmp_path: Path,
                                                         lab_name: str) -> None:
    path, router, nics = _dut(devices, tmp_path, lab_name)
    configure(router, ["sysctl", "-qw", "net.ipv4.tcp_ecn=2"])
    text = path.read_text()
    head, tail = text.split("[[links]]", 1)
    path.write_text(head.rstrip() + '''
sysctls = { "net.ipv4.tcp_ecn" = 1 }
setup = [["ip", "route", "add", "198.51.100.0/24", "dev", "rt0"], ["sleep", "47"]]
teardown = [["ip", "route", "del", "198.51.100.0/24", "dev", "rt0"]]
[[links]]''' + tail)
    with subprocess.Popen([*HOPLAB, "lab", "up", str(path)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL) as up:
        deadline = time.monotonic() + 30
        # Once the lab's record names it (between its start on the device and that
        # record, a crash would leave it: the record cannot name a PID before it exists).
        record = Path(f"/run/hoplab/labs/{lab_name}.json")
        while not (record.exists() and "setup sleep 47" in record.read_text()):
            assert time.monotonic() < deadline and up.poll() is None
            time.sleep(0.05)
        os.kill(up.pid, signal.SIGKILL)
        up.wait()
    assert _read(router, "/proc/sys/net/ipv4/tcp_ecn") == "1"
    clean = hoplab("clean", lab_name)
    assert clean.returncode == 0, clean.stderr
    # The setup command still running on the device was stopped there; the setup that
    # had run was undone by the teardown command; the sysctl is back.
    deadline = time.monotonic() + 5
    while router.pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not router.pids(), _commands(router.pids())
    assert not router.exec("ip", "route", "show", "198.51.100.0/24").stdout.strip()
    assert _read(router, "/proc/sys/net/ipv4/tcp_ecn") == "2"
    _untouched(lab_name, nics)


def _commands(pids: set[int]) -> list[str]:
    out = []
    for pid in sorted(pids):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return out
