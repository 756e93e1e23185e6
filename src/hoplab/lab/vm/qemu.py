"""One VM's QEMU: its command line (a pure function), starting it, and waiting until its
SSH server answers. The serial console goes to a file in the VM's directory, shown when
a boot fails or times out."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hoplab.errors import CapabilityError, LabError
from hoplab.lab.vm.guest import MGMT_IF
from hoplab.lab.vm.initramfs import CONFIG_TAG, MODULES_TAG, READY, ROOT_TAG
from hoplab.lab.vm.kernel import Kernel

QEMU = "qemu-system-x86_64"
BOOT_TIMEOUT_S = 120.0
SERIAL_LOG, QEMU_LOG = "serial.log", "qemu.log"
# No probing of what a lab router has not got (PS/2, three more UARTs), no audit or
# AppArmor. (tsc=reliable no_timer_check rcupdate.rcu_expedited=1 were tried too: a
# 6.12 guest panicked once in sched_clock_idle_wakeup_event with them; it does without
# them too, see tsc=unstable below.)
#
# acpi=noirq: PCI interrupts are routed without ACPI. Under TCG, evaluating a PCI
# interrupt link's ACPI methods took about 180 ms for each virtio device (0.9 s of a
# router with no lab link; the NICs are MSI-X and never use those links).
# cryptomgr.notests: no self-tests of the kernel's crypto algorithms at boot (CPU the
# four VMs of a lab booting at once share).
# tsc=unstable: the guest never marks its sched_clock stable. Doing so late in the boot
# patches the kernel's text (a static key) while the other vCPUs run it, and under
# multi-threaded TCG a vCPU then ran a stale int3: "Oops: int3" in sched_clock_cpu or
# sched_clock_idle_wakeup_event, and a panic (two boots of about 25 on one day, one a
# lab of four). Its clock is then HPET: TCP through a VM router and its boot were no
# slower (1,508-2,039 Mbit/s against 1,566-1,719; up in 5.2-6.4 s against 6.7-7.2).
APPEND = ("console=ttyS0 panic=-1 loglevel=4 printk.time=1 mitigations=off "
          "i8042.noaux i8042.nomux i8042.nopnp i8042.nokbd 8250.nr_uarts=1 audit=0 "
          "apparmor=0 acpi=noirq cryptomgr.notests tsc=unstable")
# The management NIC's MAC: on its own network, so every VM may have the same one.
MGMT_MAC = "02:00:00:00:00:01"


@dataclass(frozen=True)
class Nic:
    """A NIC of the guest: its MAC, the name the guest gives it, and its other end: a
    tap's open descriptor, or (VM to VM) a UDP socket pair on loopback (local, remote
    port)."""
    mac: str
    name: str
    fd: int | None = None
    udp: tuple[int, int] | None = None


@dataclass(frozen=True)
class Firmware:
    """A firmware's own disk image, booted by the BIOS from its own boot sector, and
    where its SSH server listens on its first NIC (address/prefix)."""
    image: Path
    management: str


@dataclass(frozen=True)
class Boot:
    node: str
    # The kernel hoplab boots and its initramfs; or, for a firmware image, None.
    kernel: Kernel | None
    initrd: Path | None
    vcpus: int
    memory: str
    accel: str              # "kvm" | "tcg"
    ssh_port: int
    dir: Path
    nics: tuple[Nic, ...] = ()
    firmware: Firmware | None = None
    # The snapshot (hoplab.lab.vm.snapshot) this VM resumes from instead of booting.
    restore: Path | None = None


@dataclass(frozen=True)
class Control:
    """QEMU's ends of what hoplab drives a kernel's VM by while it starts: its serial
    console (hoplab writes the line the guest waits for at its checkpoint), its monitor
    (QMP), and the snapshot it resumes from, open for reading."""
    console: int
    monitor: int
    incoming: int | None = None


@dataclass
class Handles:
    """hoplab's ends of a kernel VM's console and monitor, until resume.release() has
    let it go on from its checkpoint."""
    console: socket.socket
    monitor: socket.socket

    def close(self) -> None:
        self.console.close()
        self.monitor.close()


def binary() -> str:
    exe = shutil.which(QEMU)
    if exe is None:
        raise CapabilityError(f"{QEMU} is missing (apt-get install qemu-system-x86)")
    return exe


def argv(b: Boot, exe: str = QEMU, ctl: Control | None = None) -> list[str]:
    """QEMU's command line; `ctl` (a kernel's VM only) gives the descriptors of its
    console, monitor and snapshot."""
    accel = "kvm" if b.accel == "kvm" else "tcg,thread=multi"
    out = [exe, "-name", f"hoplab-{b.node}", "-nodefaults", "-no-user-config",
           "-display", "none", "-monitor", "none", "-no-reboot",
           "-accel", accel, "-cpu", "host" if b.accel == "kvm" else "max",
           "-smp", str(b.vcpus), "-m", b.memory,
           # Entropy from this machine: without it the guest's SSH server waits seconds
           # for its random numbers at every login.
           "-device", "virtio-rng-pci"]
    if b.firmware is not None:
        out += ["-serial", f"file:{b.dir / SERIAL_LOG}", *_firmware(b.firmware, b.ssh_port)]
    else:
        assert b.kernel is not None and b.initrd is not None and ctl is not None
        # The console is a socket pair's end: hoplab writes the guest's go line into
        # it, and QEMU logs what the guest writes (also once hoplab has closed its end).
        out += ["-chardev", f"socket,id=console,fd={ctl.console},server=off,"
                            f"logfile={b.dir / SERIAL_LOG}",
                "-serial", "chardev:console",
                "-chardev", f"socket,id=qmp,fd={ctl.monitor},server=off",
                "-mon", "chardev=qmp,mode=control",
                # A new generation ID at every start: a guest restored from a snapshot
                # is told so, and its kernel reseeds its random numbers (vmgenid).
                # SeaBIOS, not qboot, which gives the guest no ACPI table for it.
                "-device", "vmgenid,guid=auto",
                *(["-incoming", f"fd:{ctl.incoming}"] if ctl.incoming is not None else []),
                "-kernel", str(b.kernel.boot_image), "-initrd", str(b.initrd),
                "-append", APPEND,
                "-virtfs", f"local,path=/,mount_tag={ROOT_TAG},security_model=none,"
                           f"readonly=on,multidevs=remap",
                "-virtfs", f"local,path={b.dir},mount_tag={CONFIG_TAG},"
                           f"security_model=none,readonly=on"]
        if b.kernel.modules is not None:
            out += ["-virtfs", f"local,path={b.kernel.modules},mount_tag={MODULES_TAG},"
                               f"security_model=none,readonly=on"]
        out += ["-netdev", f"user,id={MGMT_IF},net=10.0.2.0/24,"
                           f"hostfwd=tcp:127.0.0.1:{b.ssh_port}-:22"]
    out += ["-device", f"virtio-net-pci,netdev={MGMT_IF},mac={MGMT_MAC}"]
    for i, nic in enumerate(b.nics):
        if nic.fd is not None:
            out += ["-netdev", f"tap,id=n{i},fd={nic.fd}"]
        elif nic.udp is not None:
            out += ["-netdev", f"socket,id=n{i},udp=127.0.0.1:{nic.udp[1]},"
                               f"localaddr=127.0.0.1:{nic.udp[0]}"]
        out += ["-device", f"virtio-net-pci,netdev=n{i},mac={nic.mac}"]
    return out


def _firmware(f: Firmware, ssh_port: int) -> list[str]:
    """A firmware image's disk and management NIC. The disk is opened copy-on-write
    (snapshot=on: QEMU writes to a temporary file it has already unlinked), so the
    user's image is never changed and every run boots the same one. IDE, as every x86
    firmware's kernel can read it. The user network is made the subnet of the
    firmware's management address, with this machine at another address of it: the
    firmware's SSH server is reached where it listens, as on its LAN port."""
    iface = ipaddress.IPv4Interface(f.management)
    net = iface.network
    ends = [net.network_address + k for k in (1, 2)] + \
        [net.broadcast_address - k for k in (1, 2)]
    host, *_, last = [a for a in ends if a != iface.ip]
    return ["-drive", f"file={f.image},format=raw,if=ide,snapshot=on",
            "-netdev", f"user,id={MGMT_IF},net={net},host={host},dhcpstart={last},"
                       f"hostfwd=tcp:127.0.0.1:{ssh_port}-{iface.ip}:22"]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port nothing holds now (QEMU binds it a moment later)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# QEMUs this process started, by pid, until they exit: a lab outlives the call that
# built it (as hoplab.lab.wire keeps its wires), and teardown reaps them here.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass
class Started:
    proc: subprocess.Popen[bytes]
    argv: list[str]
    # A kernel's VM: what hoplab lets it go on from its checkpoint with.
    handles: Handles | None


def start(b: Boot) -> Started:
    exe = binary()
    forget_exited()
    fds = [n.fd for n in b.nics if n.fd is not None]
    handles, ctl, theirs = None, None, []
    if b.firmware is None:
        # First: a snapshot another lab removed meanwhile fails here, with nothing open.
        incoming = os.open(b.restore, os.O_RDONLY) if b.restore is not None else None
        console, console_q = socket.socketpair()
        monitor, monitor_q = socket.socketpair()
        handles, theirs = Handles(console, monitor), [console_q, monitor_q]
        ctl = Control(console_q.fileno(), monitor_q.fileno(), incoming)
        fds += [console_q.fileno(), monitor_q.fileno(),
                *([incoming] if incoming is not None else [])]
    cmd = argv(b, exe, ctl)
    try:
        with open(b.dir / QEMU_LOG, "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, pass_fds=fds,
                                    start_new_session=True)
    except BaseException:
        if handles is not None:
            handles.close()
        raise
    finally:
        for s in theirs:
            s.close()
        if ctl is not None and ctl.incoming is not None:
            os.close(ctl.incoming)
    _CHILDREN[proc.pid] = proc
    return Started(proc, cmd, handles)


def forget_exited() -> None:
    """Reap the QEMUs of this process that exited (a VM powered off, or killed)."""
    for pid, proc in list(_CHILDREN.items()):
        if proc.poll() is not None:
            del _CHILDREN[pid]


def _banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as s:
            s.settimeout(2.0)
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def said(d: Path, text: str) -> bool:
    """Whether the guest's console has `text` (a line its /init writes: initramfs.READY
    once the management NIC has its address, CHECKPOINT, RESUMED)."""
    try:
        with open(d / SERIAL_LOG, "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False


def wait_ready(b: Boot, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Until the guest's SSH server sends its banner; the console's end and QEMU's
    messages in the error if QEMU exits or the deadline passes first. The SSH port is
    tried only once the console says the management NIC is up: QEMU's user network
    accepts a connection at once and holds it while the guest does not answer, so a try
    made before the NIC was up waited out its 2 s with the server long since listening
    (banners 1.9 to 2.2 s after the guest was ready, in two boots of three)."""
    # A firmware says nothing hoplab knows to its console: its banner alone.
    nic_up = b.firmware is not None
    while True:
        if proc.poll() is not None:
            raise LabError(f"VM {b.node}: QEMU exited with {proc.returncode} while booting"
                           f"{console_tail(b.dir)}")
        nic_up = nic_up or said(b.dir, READY)
        # QEMU's user network accepts the connection before the guest listens; only
        # the server's banner says it is up.
        if nic_up and _banner(b.ssh_port):
            return
        if time.monotonic() > deadline:
            raise LabError(f"VM {b.node}: no SSH server after {BOOT_TIMEOUT_S:.0f} s"
                           f"{console_tail(b.dir)}")
        time.sleep(0.05)


# What a guest kernel's oops says of itself: its kind, where it was, the panic. A panic's
# last 25 lines are its stack and registers, which name none of them.
_OOPS = (re.compile(r"\] (Oops: |BUG: |general protection fault|kernel BUG at |"
                    r"invalid opcode: )"),
         re.compile(r"\] RIP: \S+:\S"), re.compile(r"\] Kernel panic - "))


def oops(serial: str) -> list[str]:
    """The first line of each of _OOPS in a guest's console text; [] when its kernel
    did not oops."""
    lines = serial.splitlines()
    found = [next((ln.strip() for ln in lines if pat.search(ln)), None) for pat in _OOPS]
    return [ln for ln in found if ln] if found[0] or found[2] else []


def oopsed(d: Path) -> list[str]:
    """What the guest's console says of its kernel's oops or panic; [] if none."""
    try:
        return oops((d / SERIAL_LOG).read_text(errors="replace"))
    except OSError:
        return []


def keep_log(d: Path, name: str) -> Path:
    """Move a VM's log aside (a QEMU started again in `d` writes a new one): the path
    it is kept at, e.g. serial.1.log."""
    kept = d / name.replace(".log", ".1.log")
    with contextlib.suppress(FileNotFoundError):
        (d / name).replace(kept)
    return kept


def console_tail(d: Path, lines: int = 25) -> str:
    out = []
    for name in (QEMU_LOG, SERIAL_LOG):
        try:
            whole = (d / name).read_text(errors="replace").strip()
        except OSError:
            continue
        text = whole.splitlines()[-lines:]
        if name == SERIAL_LOG and (said := oops(whole)):
            out.append("\nthe guest kernel oopsed or panicked:\n" + "\n".join(said))
        if text:
            out.append(f"\n--- {d / name} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "".join(out)


def close_fds(nics: tuple[Nic, ...]) -> None:
    for n in nics:
        if n.fd is not None:
            os.close(n.fd)
