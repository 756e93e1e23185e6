"""A VM is ready when its SSH server sends its banner, and its SSH port is tried only
after the guest's console says the management NIC is up: QEMU's user network accepts a
connection before the guest can answer and holds it, so an early try waited out its
2 s while the server was already listening."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.errors import LabError
from hoplab.lab.vm import guest, initramfs, qemu
from hoplab.lab.vm.initramfs import READY
from hoplab.lab.vm.kernel import Kernel


class _Server:
    """An SSH server's stand-in on loopback: sends a banner to each connection and
    counts them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.sendall(b"SSH-2.0-dropbear\r\n")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def _boot(tmp_path: Path, port: int) -> qemu.Boot:
    k = Kernel("6.12.100+deb12-amd64", tmp_path / "vmlinuz", None, "debian:6.12.100")
    return qemu.Boot("r1", k, tmp_path / "initrd.gz", 2, "512M", "tcg", port, tmp_path)


def test_the_port_is_not_tried_before_the_console_says_ready(tmp_path: Path,
                                                             server: _Server) -> None:
    (tmp_path / qemu.SERIAL_LOG).write_text("[    1.2] virtio_net virtio1 mgmt: renamed\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(LabError, match="no SSH server"):
            qemu.wait_ready(_boot(tmp_path, server.port), sleeper, time.monotonic() + 0.3)
        assert server.connections == 0
        with open(tmp_path / qemu.SERIAL_LOG, "a") as log:
            log.write(f"{READY} 3.41\n")
        qemu.wait_ready(_boot(tmp_path, server.port), sleeper, time.monotonic() + 30)
        assert server.connections == 1
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_qemu_that_exits_is_an_error_with_its_console(tmp_path: Path) -> None:
    (tmp_path / qemu.SERIAL_LOG).write_text("Kernel panic - not syncing: VFS\n")
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    done.wait()
    with pytest.raises(LabError, match=r"(?s)QEMU exited with 1.*Kernel panic"):
        qemu.wait_ready(_boot(tmp_path, qemu.free_port()), done, time.monotonic() + 30)


def test_the_guests_configuration_status_is_read_from_its_console(tmp_path: Path) -> None:
    log = tmp_path / "serial.log"
    assert guest.configured(log) is None            # no console yet
    log.write_bytes(b"[    1.2] virtio_net virtio1 eth0: renamed\nhoplab-vm-ready 1.91\n")
    assert guest.configured(log) is None            # booting, not configured yet
    # A kernel message may share the line.
    log.write_bytes(log.read_bytes() + b"[    2.1] random: crng init done\rhoplab-configured"
                                       b" 255 2.48\n")
    assert guest.configured(log) == 255
    log.write_bytes(b"hoplab-configured 0 2.40\n")
    assert guest.configured(log) == 0


def test_stage2_configures_before_the_ssh_server_starts(tmp_path: Path) -> None:
    """The SSH server's banner is the sign the guest is configured: stage2 runs the
    lab's script first, and says its status on the console."""
    stage2 = guest.STAGE2.splitlines()
    config = next(i for i, line in enumerate(stage2) if "sh /hoplab/config" in line)
    server = next(i for i, line in enumerate(stage2) if line.startswith("exec dropbear"))
    assert config < server
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "client_key.pub").write_text("ssh-ed25519 AAAA\n")
    (keys / "host_key").write_bytes(b"k")
    guest.write_dir(tmp_path / "vm", hostname="r1", nics=[], keys=keys, modules=False,
                    config="sysctl -qw net.ipv4.ip_forward=1\n")
    assert (tmp_path / "vm" / "config").read_text() == "sysctl -qw net.ipv4.ip_forward=1\n"


def stage2_path_first(stage2: str) -> str:
    path = next(line for line in stage2.splitlines() if line.startswith("export PATH="))
    return ":".join(path.removeprefix("export PATH=").split(":")[:2])


def test_init_puts_perf_behind_a_wrapper_where_modules_come_over_9p(tmp_path: Path) -> None:
    """perf walks /lib/modules/RELEASE as it starts, a 9p share under TCG: /init puts
    hoplab's wrapper first on PATH (unless the root has a perf there), and it runs
    the perf after it in a mount namespace with that tree hidden."""
    init = initramfs.INIT
    put = init.index(f"cp hoplab/perf .{guest.PERF_AT} && chmod 0755 .{guest.PERF_AT}")
    assert init.index("if [ -s hoplab/modules ]") < put < init.index("switch_root")
    assert stage2_path_first(guest.STAGE2) == "/usr/local/sbin:/usr/local/bin"
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "client_key.pub").write_text("ssh-ed25519 AAAA\n")
    (keys / "host_key").write_bytes(b"k")
    guest.write_dir(tmp_path / "vm", hostname="r1", nics=[], keys=keys, modules=True)
    wrapper = (tmp_path / "vm" / "perf").read_text()
    assert wrapper == guest.PERF_WRAPPER and wrapper.startswith("#!/bin/sh\n")
    assert subprocess.run(["sh", "-n"], input=wrapper, text=True, check=False).returncode == 0
    # The perf after /usr/local/bin, in its own mount namespace, the tree under a tmpfs.
    assert "PATH=/usr/sbin:/usr/bin:/sbin:/bin" in wrapper
    assert "exec unshare -m sh -c" in wrapper and '"/lib/modules/$(uname -r)"' in wrapper
    assert 'exec perf "$@"\' perf "$@"' in wrapper
