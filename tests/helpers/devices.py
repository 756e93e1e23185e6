"""Emulated devices for tests: reached only over SSH, on a management veth.

Two kinds, both in a network namespace of their own:

- "openwrt-like": a mount namespace too, chrooted into a root file system holding
  only Debian's static BusyBox (without its tc and adjtimex applets, as OpenWrt's
  default BusyBox), dropbear, iperf3 and irtt with their libraries; no Python, no
  bash, no tc, no ethtool, /etc/openwrt_release and /tmp/sysinfo/model as on OpenWrt.
- "linux-board": Debian's OpenSSH server running in the namespace on this machine's
  file system, so tc, perf and ethtool are there (seed 003's Ubuntu boards); it allows
  TCP forwarding, so it can be a jump host.

Every name starts with ``hldev-`` plus a per-farm token, so `hoplab clean` and the lab
tests' leak checks never take a device for a lab's node. Keys are made per farm, the
known_hosts file is written by the farm, and `close()` kills every process in the
devices' namespaces before deleting them. A farm records its owner PID under
/run/hldev; a later farm removes what a dead owner left (a killed test session).
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hoplab.nodes.ssh_target import SshTarget
from tests.helpers.reaping import held

Kind = Literal["openwrt-like", "linux-board"]
PREFIX = "hldev-"
STATE = Path("/run/hldev")
# Management addresses: one /30 per device out of this block (host side .1, device .2).
_MGMT = ipaddress.ip_network("10.253.0.0/16")
# The OpenWrt-like root: the binaries copied in, with their libraries.
_COPIED = ("/usr/sbin/dropbear", "/usr/bin/iperf3", "/usr/bin/irtt")
# BusyBox applets removed from the OpenWrt-like root: OpenWrt's default BusyBox has
# neither (tc comes from the tc-tiny/tc-full packages, when at all).
_NOT_ON_OPENWRT = ("tc", "adjtimex", "ethtool")
OPENWRT_RELEASE = """DISTRIB_ID='OpenWrt'
DISTRIB_RELEASE='23.05.5'
DISTRIB_REVISION='r24106-10cc5fcd00'
DISTRIB_TARGET='x86/64'
DISTRIB_ARCH='x86_64'
DISTRIB_DESCRIPTION='OpenWrt 23.05.5 r24106-10cc5fcd00'
DISTRIB_TAINTS=''
"""
OPENWRT_MODEL = "hoplab emulated openwrt-like"


def _sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _ns_pids(netns: str) -> set[int]:
    res = _sh("ip", "netns", "pids", netns, check=False)
    return {int(p) for p in res.stdout.split()}


def _kill_all(netns: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while pids := _ns_pids(netns):
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes in {netns} survive SIGKILL: {sorted(pids)}")
        time.sleep(0.02)


def libraries(binary: str) -> list[str]:
    """The shared libraries `binary` loads (ldd), by path."""
    out = _sh("ldd", binary, check=False).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.append(parts[2])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    return libs


def _copy_in(root: Path, path: str) -> None:
    dest = root / path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(path), dest)


@dataclass
class Device:
    """One emulated device. `address` is its management address, reachable from this
    machine's root namespace; `user` is root."""
    name: str
    kind: Kind
    netns: str
    address: str
    host_if: str
    dir: Path
    host_key_pub: str
    farm: Farm
    server_pid: int | None = None
    links: list[str] = field(default_factory=list)

    @property
    def root(self) -> Path | None:
        return self.dir / "root" if self.kind == "openwrt-like" else None

    def target(self, node: str | None = None, **kw: object) -> SshTarget:
        """How hoplab reaches it: its key and the farm's known_hosts."""
        args: dict[str, object] = {
            "node": node or self.name, "destination": f"root@{self.address}",
            "identity": str(self.farm.identity), "known_hosts": str(self.farm.known_hosts)}
        args.update(kw)
        return SshTarget(**args)  # type: ignore[arg-type]

    def ssh_argv(self) -> list[str]:
        """The system ssh client's argv to reach it (for tests that check by hand)."""
        return ["ssh", "-i", str(self.farm.identity), "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.farm.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", f"root@{self.address}"]

    def start_server(self) -> None:
        if self.server_pid is not None:
            return
        log = (self.dir / "server.log").open("ab")
        if self.kind == "openwrt-like":
            assert self.root is not None
            root = str(self.root)
            # A mount namespace of its own: /proc, /sys (this namespace's interfaces)
            # and /tmp as tmpfs, then chroot: the device sees only its root.
            script = (
                'set -e; mount --make-rprivate /; '
                'mount -t proc proc "$1/proc"; mount -t sysfs sysfs "$1/sys"; '
                'mount -t tmpfs tmpfs "$1/tmp"; mkdir -p "$1/tmp/sysinfo"; '
                'printf "%s\\n" "$2" > "$1/tmp/sysinfo/model"; '
                'exec chroot "$1" /usr/sbin/dropbear -F -E -s -j -k '
                '-r /etc/dropbear/dropbear_ed25519_host_key '
                '-r /etc/dropbear/dropbear_rsa_host_key -p "$3:22"')
            argv = ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--",
                    "/bin/sh", "-c", script, "sh", root, OPENWRT_MODEL, self.address]
        else:
            # A mount namespace with a home of its own: a fresh board's root has no
            # shell start-up files (this machine's ~/.bashrc would run per command).
            script = (
                'set -e; mount -t tmpfs -o mode=0700 tmpfs /root; mkdir -m 0700 /root/.ssh; '
                # Each board's own WireGuard control sockets (wireguard-go's, by name).
                'mkdir -p /run/wireguard; mount -t tmpfs -o mode=0700 tmpfs /run/wireguard; '
                'cp "$1" /root/.ssh/authorized_keys; exec /usr/sbin/sshd -D -e -f "$2"')
            argv = ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--",
                    "/bin/sh", "-c", script, "sh", str(self.dir / "authorized_keys"),
                    str(self.dir / "sshd_config")]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
        log.close()
        self.server_pid = proc.pid
        self.farm.children.append(proc)
        held(proc.pid)  # the farm's, reaped at its close, not by the test that asked
        self._wait_listening()

    def _wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = _sh("ip", "netns", "exec", self.netns, "ss", "-Htln", "sport = :22",
                      check=False)
            if res.stdout.strip():
                return
            time.sleep(0.02)
        log = (self.dir / "server.log").read_text(errors="replace")
        raise RuntimeError(f"{self.name}: SSH server not listening after {timeout} s: {log}")

    def kill_server(self) -> None:
        """Kill the SSH server and every process on the device, as a power cut would:
        connections drop at once."""
        _kill_all(self.netns)
        self.server_pid = None

    def kill_ssh(self) -> None:
        """Kill the SSH server alone (listener and connections), as a crash of dropbear
        or sshd would: the commands it ran live on, orphaned."""
        for pid in _ns_pids(self.netns):
            with suppress(OSError):
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                if comm in ("dropbear", "sshd"):
                    os.kill(pid, signal.SIGKILL)
        self.server_pid = None

    def pids(self) -> set[int]:
        """Every process on the device but its SSH listener (PIDs as this machine sees
        them): what a test checks is empty after hoplab stopped its processes."""
        return _ns_pids(self.netns) - self._listeners()

    def _listeners(self) -> set[int]:
        if self.server_pid is None:
            return set()
        # The listener is the server's process itself (exec'd through ip/unshare/chroot).
        return {self.server_pid}

    def cable(self, dev_if: str, host_if: str, netns: str | None = None) -> None:
        """A veth between the device (`dev_if`, left down with no address: the lab or a
        setup command configures it) and this machine: `host_if` in the root namespace,
        or in `netns`."""
        _sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", dev_if,
            "netns", self.netns)
        if netns is not None:
            _sh("ip", "link", "set", host_if, "netns", netns)
        self.links.append(host_if)

    def exec(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a command in the device's namespace from this machine (not over SSH):
        for a test to set up or check what the device's own shell would."""
        assert self.server_pid is not None, "device is down"
        root = ["-r"] if self.kind == "openwrt-like" else []
        return _sh("nsenter", "-t", str(self.server_pid), "-m", "-n", *root, *argv,
                   check=False, timeout=timeout)


class Farm:
    """Devices of one test session or bench: `add(kind)`, then `close()`."""

    def __init__(self, base: Path) -> None:
        self.token = secrets.token_hex(2)
        self.base = base / f"{PREFIX}{self.token}"
        self.base.mkdir(parents=True, exist_ok=False)
        self.devices: list[Device] = []
        self._shared: dict[str, Device] = {}
        self.children: list[subprocess.Popen[bytes]] = []
        self.known_hosts = self.base / "known_hosts"
        self.known_hosts.touch()
        self.identity = self.base / "id_ed25519"
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hoplab-test",
            "-f", str(self.identity))
        self.pubkey = self.identity.with_suffix(".pub").read_text()
        STATE.mkdir(parents=True, exist_ok=True)
        remove_stale()
        (STATE / self.token).write_text(f"{os.getpid()}\n{self.base}\n")

    def add(self, kind: Kind, *, known: bool = True) -> Device:
        """A new device of `kind`, its SSH server up; `known=False` leaves its host key
        out of known_hosts (the test of an unknown key)."""
        idx = len(self.devices)
        name = f"{PREFIX}{self.token}{idx:02d}"
        ddir = self.base / name
        ddir.mkdir()
        netns = name
        _sh("ip", "netns", "add", netns)
        host_if, dev_if = f"{name}h", f"{name}d"
        hostaddr, devaddr = self._subnet(name)
        _sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", dev_if,
            "netns", netns)
        _sh("ip", "addr", "add", f"{hostaddr}/30", "dev", host_if)
        _sh("ip", "link", "set", host_if, "up")
        for cmd in (["ip", "addr", "add", f"{devaddr}/30", "dev", dev_if],
                    ["ip", "link", "set", dev_if, "up"], ["ip", "link", "set", "lo", "up"],
                    ["ip", "route", "add", "default", "via", hostaddr]):
            _sh("ip", "netns", "exec", netns, *cmd)
        if kind == "openwrt-like":
            pub = self._openwrt_root(ddir / "root")
        else:
            pub = self._sshd_config(ddir, devaddr)
        dev = Device(name=name, kind=kind, netns=netns, address=devaddr, host_if=host_if,
                     dir=ddir, host_key_pub=pub, farm=self)
        self.devices.append(dev)
        if known:
            self.trust(dev)
        dev.start_server()
        return dev

    def shared(self, kind: Kind) -> Device:
        """One device of `kind` shared by the tests that only run commands on it (a test
        that stops its server or changes it adds its own)."""
        dev = self._shared.get(kind)
        if dev is None or dev.server_pid is None:
            dev = self._shared[kind] = self.add(kind)
        return dev

    def trust(self, dev: Device) -> None:
        with self.known_hosts.open("a") as f:
            f.write(f"{dev.address} {dev.host_key_pub}\n")

    def _subnet(self, name: str) -> tuple[str, str]:
        # One lock for every farm on this machine: two sessions never take one /30.
        with (STATE / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # Taken: on an interface, or handed out (to a farm that has not added it yet).
            used = _sh("ip", "-o", "-4", "addr", "show").stdout
            given = {line.split()[1] for f in STATE.glob("*.addr")
                     for line in f.read_text().splitlines() if len(line.split()) == 2}
            for net in _MGMT.subnets(new_prefix=30):
                host, dev = (str(a) for a in list(net.hosts())[:2])
                if f" {host}/" not in used and host not in given:
                    with (STATE / f"{self.token}.addr").open("a") as rec:
                        rec.write(f"{name} {host}\n")
                    return host, dev
        raise RuntimeError("no free management subnet")

    def _openwrt_root(self, root: Path) -> str:
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc/dropbear", "proc", "sys", "tmp",
                  "dev", "root/.ssh", "var/run"):
            (root / d).mkdir(parents=True, exist_ok=True)
        shutil.copy2("/bin/busybox", root / "bin/busybox")
        _sh("chroot", str(root), "/bin/busybox", "--install", "-s")
        for applet in _NOT_ON_OPENWRT:
            for d in ("bin", "sbin", "usr/bin", "usr/sbin"):
                with suppress(FileNotFoundError):
                    (root / d / applet).unlink()
        for binary in _COPIED:
            _copy_in(root, binary)
            for lib in libraries(binary):
                _copy_in(root, lib)
        for dev, major, minor in (("null", 1, 3), ("zero", 1, 5), ("random", 1, 8),
                                  ("urandom", 1, 9), ("tty", 5, 0)):
            os.mknod(root / "dev" / dev, 0o666 | 0o020000, os.makedev(major, minor))
        (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/ash\n")
        (root / "etc/group").write_text("root:x:0:\n")
        (root / "etc/shells").write_text("/bin/ash\n/bin/sh\n")
        (root / "etc/openwrt_release").write_text(OPENWRT_RELEASE)
        (root / "etc/os-release").write_text(
            'NAME="OpenWrt"\nVERSION="23.05.5"\nID="openwrt"\n'
            'PRETTY_NAME="OpenWrt 23.05.5"\n')
        os.chmod(root / "root", 0o700)
        os.chmod(root / "root/.ssh", 0o700)
        (root / "root/.ssh/authorized_keys").write_text(self.pubkey)
        os.chmod(root / "root/.ssh/authorized_keys", 0o600)
        # Both kinds, as OpenWrt makes them: dropbear 2022.83 with an ed25519 key alone
        # fails an assertion (rsa.c:164) when a client with no known key asks for RSA.
        _sh("dropbearkey", "-t", "rsa", "-s", "2048", "-f",
            str(root / "etc/dropbear/dropbear_rsa_host_key"))
        key = root / "etc/dropbear/dropbear_ed25519_host_key"
        _sh("dropbearkey", "-t", "ed25519", "-f", str(key))
        pub = _sh("dropbearkey", "-y", "-f", str(key)).stdout
        line = next(x for x in pub.splitlines() if x.startswith("ssh-ed25519 "))
        return " ".join(line.split()[:2])

    def _sshd_config(self, ddir: Path, address: str) -> str:
        key = ddir / "ssh_host_ed25519_key"
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        auth = ddir / "authorized_keys"
        auth.write_text(self.pubkey)
        os.chmod(auth, 0o600)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        (ddir / "sshd_config").write_text(
            f"ListenAddress {address}:22\nHostKey {key}\nPidFile {ddir}/sshd.pid\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nAllowTcpForwarding yes\nX11Forwarding no\nPrintMotd no\n"
            "MaxSessions 100\nMaxStartups 100\nLogLevel ERROR\n")
        return " ".join(key.with_suffix(".pub").read_text().split()[:2])

    def close(self) -> None:
        for dev in self.devices:
            with suppress(Exception):
                dev.kill_server()
        for child in self.children:
            with suppress(Exception):
                child.wait(timeout=5)
        for dev in self.devices:
            for link in dev.links:
                _sh("ip", "link", "del", link, check=False)
            _sh("ip", "link", "del", dev.host_if, check=False)
            _sh("ip", "netns", "del", dev.netns, check=False)
        shutil.rmtree(self.base, ignore_errors=True)
        for f in (STATE / self.token, STATE / f"{self.token}.addr"):
            f.unlink(missing_ok=True)
        self.devices.clear()


def remove_stale() -> None:
    """Remove the devices of farms whose owner process is gone."""
    for rec in STATE.glob("????"):
        try:
            pid_s, base = rec.read_text().split("\n")[:2]
            os.kill(int(pid_s), 0)
            continue
        except ProcessLookupError:
            pass
        except (ValueError, OSError):
            continue
        token = rec.name
        for line in _sh("ip", "netns", "list", check=False).stdout.splitlines():
            ns = line.split()[0] if line.split() else ""
            if ns.startswith(f"{PREFIX}{token}"):
                _kill_all(ns)
                _sh("ip", "link", "del", f"{ns}h", check=False)
                _sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(base, ignore_errors=True)
        rec.unlink(missing_ok=True)
        (STATE / f"{token}.addr").unlink(missing_ok=True)


@contextmanager
def farm(base: Path) -> Iterator[Farm]:
    f = Farm(base)
    try:
        yield f
    finally:
        f.close()
