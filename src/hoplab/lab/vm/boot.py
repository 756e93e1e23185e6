"""A lab's VMs: planned and recorded before anything exists, booted in parallel,
waited for by readiness (their SSH servers' banners) and configured over SSH.

Order, for a crash or Ctrl-C at any point: prepare() fetches kernels and writes each
VM's entry (its SSH port, keys, directory) into the lab's record before anything is
made; start() opens each VM's taps (they vanish with the last descriptor) and records
QEMU's pid the moment it exists, so the lab's teardown or `hoplab clean` stops it."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hoplab.errors import CapabilityError, UsageError
from hoplab.lab.vm import (
    accel,
    cgroup,
    guest,
    hostkey,
    initramfs,
    kernel,
    power,
    qemu,
    resume,
    snapshot,
    taps,
)

if TYPE_CHECKING:
    import subprocess

    from hoplab.lab.plan import Plan
    from hoplab.lab.state import LabState
    from hoplab.spec.model import Lab, VmSpec

KEYS_DIR = "vm-keys"


@dataclass
class Vm:
    boot: qemu.Boot
    proc: subprocess.Popen[bytes] | None = None
    started: qemu.Started | None = None
    # cpu = "N%": its cgroup (in the record before it is made) and quota per period.
    cgroup: tuple[cgroup.Hierarchy, Path, int] | None = None
    # A firmware whose host key the lab file does not give: it is learnt at its first
    # banner (trust on first use) and kept in the lab's known_hosts.
    learn_key: bool = False


def vm_nodes(lab: Lab) -> list[str]:
    return [n.name for n in lab.nodes if n.vm is not None]


def prepare(lab: Lab, plan: Plan, state: LabState) -> dict[str, Vm]:
    """Each VM's boot, and its entry in the record (state.summary["nodes"]): what the
    executor registry needs to reach it over SSH. Fetches kernels the first time."""
    names = vm_nodes(lab)
    if not names:
        return {}
    keys = state.rundir / KEYS_DIR
    client, host_pub = guest.make_keys(keys)
    known = []
    vms: dict[str, Vm] = {}
    for name in names:
        spec = lab.node(name).vm
        assert spec is not None
        port = qemu.free_port()
        d = state.rundir / "vm" / name
        ssh: dict[str, Any] = {"destination": "root@127.0.0.1", "port": port,
                               "identity": str(client),
                               "known_hosts": str(known_hosts(state))}
        if spec.image is not None:
            vms[name], source = _firmware_vm(name, spec, port, d), f"image:{spec.image}"
            release, shared = None, None
            ssh.update(destination=f"{spec.user}@127.0.0.1", identity=spec.identity)
            if spec.host_key is not None:
                known.append(f"[127.0.0.1]:{port} {spec.host_key}\n")
        else:
            assert spec.kernel is not None
            k = kernel.resolve(spec.kernel, spec.modules)
            initrd = initramfs.image(k)
            vms[name] = Vm(qemu.Boot(name, k, initrd, spec.vcpus, f"{spec.memory_mib}M",
                                     accel.choose(k.image, initrd, qemu.binary()), port, d))
            source, release = k.source, k.release
            known.append(f"[127.0.0.1]:{port} {host_pub}\n")
            # Its root is this machine's, and its perf hoplab's wrapper of this one's.
            shared = {initramfs.PERF_AT: "perf"}
        cg = None if spec.cpu_pct is None else \
            _cpu_cgroup(state, name, spec.cpu_pct, spec.vcpus)
        vms[name].cgroup = cg
        state.summary["nodes"][name].update(
            netns=None, kind="vm", ssh=ssh,
            vm={"kernel": source, "release": release, "vcpus": spec.vcpus,
                "memory_mib": spec.memory_mib, "accel": vms[name].boot.accel,
                "dir": str(d), "cpu_pct": spec.cpu_pct,
                "cgroup": str(cg[1]) if cg else None, "shared_root": shared})
    known_hosts(state).write_text("".join(known))
    return vms


def _firmware_vm(name: str, spec: VmSpec, port: int, d: Path) -> Vm:
    """A firmware image's VM: booted by SeaBIOS from the image's own boot sector; its
    host key is learnt at its first banner unless the lab file gives it (learn_key)."""
    assert spec.image is not None
    image = Path(spec.image)
    if not image.is_file():
        raise UsageError(f"VM {name}: image {image}: no such file (a firmware's disk "
                         f"image, e.g. OpenWrt's x86-64 ext4-combined.img, unpacked)")
    boot = qemu.Boot(name, None, None, spec.vcpus, f"{spec.memory_mib}M", accel.known(),
                     port, d, firmware=qemu.Firmware(image, spec.management))
    return Vm(boot, learn_key=spec.host_key is None)


def _cpu_cgroup(state: LabState, name: str, pct: float, vcpus: int
                ) -> tuple[cgroup.Hierarchy, Path, int]:
    h = cgroup.hierarchy()
    if h is None:
        raise CapabilityError(f"VM {name}: cpu = \"{pct:g}%\" needs the cgroup CPU "
                              "controller, and none is mounted here")
    return h, cgroup.path_for(h, state.rundir, name), cgroup.quota_us(pct, vcpus)


def limit_cpu(vms: dict[str, Vm]) -> None:
    """Each VM with a CPU share gets its limit, once it is up and configured: the
    share stands in for a small router's CPU while it forwards, not while it boots
    (under TCG at 25 % a boot would take minutes)."""
    for vm in vms.values():
        if vm.cgroup is not None and vm.proc is not None:
            h, path, quota = vm.cgroup
            cgroup.limit(h, path, vm.proc.pid, quota)


def _nics(lab: Lab, plan: Plan, name: str, udp: dict[int, tuple[int, int]]
          ) -> list[tuple[qemu.Nic, str | None]]:
    """The VM's NICs, in link order, each with the namespace its tap goes in."""
    out: list[tuple[qemu.Nic, str | None]] = []
    for i in plan.node(name).ifaces:
        if i.kind != "guest" or i.link is None:
            continue
        mac = taps.mac(lab.name, name, i.link)
        peer = plan.node(i.peer)
        far = next(x for x in peer.ifaces if x.link == i.link and x.kind in ("tap", "guest"))
        if far.kind == "guest":
            a, b = udp[i.link]
            ports = (a, b) if name == lab.links[i.link].a else (b, a)
            out.append((qemu.Nic(mac, i.name, udp=ports), None))
        else:
            out.append((qemu.Nic(mac, i.name), f"{peer.netns}\0{far.name}"))
    return out


def start(lab: Lab, plan: Plan, state: LabState, vms: dict[str, Vm],
          configs: dict[str, str] | None = None) -> None:
    """Open every VM's taps in their namespaces and start its QEMU, recording each pid;
    `configs`: the script each VM's stage2 runs before its SSH server (vm/guest.py)."""
    import socket

    udp = {lk.index: (qemu.free_port(socket.SOCK_DGRAM), qemu.free_port(socket.SOCK_DGRAM))
           for lk in lab.links if all(lab.node(n).vm is not None for n in (lk.a, lk.b))}
    for name, vm in vms.items():
        nics = []
        try:
            for nic, place in _nics(lab, plan, name, udp):
                if place is not None:
                    ns, ifname = place.split("\0")
                    nic = replace(nic, fd=taps.open_tap(ns, ifname))
                nics.append(nic)
            vm.boot = replace(vm.boot, nics=tuple(nics))
            if vm.boot.kernel is None:
                vm.boot.dir.mkdir(parents=True, exist_ok=True)
            else:
                mgmt = [(qemu.MGMT_MAC, guest.MGMT_IF)]
                guest.write_dir(vm.boot.dir, hostname=name,
                                nics=mgmt + [(n.mac, n.name) for n in nics],
                                keys=state.rundir / KEYS_DIR,
                                modules=vm.boot.kernel.modules is not None,
                                config=(configs or {}).get(name, ""))
            vm.boot = replace(vm.boot, restore=snapshot.stored(vm.boot, qemu.binary()))
            try:
                vm.started = qemu.start(vm.boot)
            except FileNotFoundError:
                if vm.boot.restore is None or vm.boot.restore.exists():
                    raise
                # Another lab's QEMU could not load it and removed it meanwhile.
                vm.boot = replace(vm.boot, restore=None)
                vm.started = qemu.start(vm.boot)
            state.summary["nodes"][name]["vm"]["start"] = \
                "restored" if vm.boot.restore is not None else "booted"
            _record(state, vm)
        except BaseException:
            # Nothing holds the taps but QEMU now (or nothing does, and they are gone).
            qemu.close_fds(tuple(nics))
            vm.boot = replace(vm.boot, nics=_let_go(vm.boot.nics))
            raise


def _record(state: LabState, vm: Vm) -> None:
    assert vm.started is not None
    vm.proc = vm.started.proc
    state.add_process(vm.proc.pid, vm.started.argv, power.qemu_node(vm.boot.node),
                      f"QEMU of VM {vm.boot.node}")


def close_nics(vms: dict[str, Vm]) -> None:
    """Let go of the VMs' taps: from now on QEMU alone holds each, and it vanishes when
    QEMU exits. Until then hoplab holds them too, so a VM started again before its
    checkpoint gets the same taps, as the lab configured their other ends."""
    for vm in vms.values():
        qemu.close_fds(vm.boot.nics)
        vm.boot = replace(vm.boot, nics=_let_go(vm.boot.nics))


def _let_go(nics: tuple[qemu.Nic, ...]) -> tuple[qemu.Nic, ...]:
    return tuple(replace(n, fd=None) for n in nics)


def wait_ready(vms: dict[str, Vm], state: LabState,
               timeout: float = qemu.BOOT_TIMEOUT_S) -> list[str]:
    """Every VM's SSH server up; what was done to get there that the user should know
    (a VM booted again) is returned."""
    deadline = time.monotonic() + timeout
    try:
        started = [(vm.boot, vm.started) for vm in vms.values() if vm.started is not None]
        notes = resume.release(resume.plan(started, qemu.binary()), deadline,
                               partial(_again, state, vms))
    finally:
        close_nics(vms)
    for vm in vms.values():
        assert vm.proc is not None
        qemu.wait_ready(vm.boot, vm.proc, deadline)
        if vm.learn_key:
            hostkey.learn(vm.boot.node, vm.boot.ssh_port, known_hosts(state))
    return notes


def _again(state: LabState, vms: dict[str, Vm], b: qemu.Boot) -> qemu.Started:
    """A VM's QEMU started again with boot `b` (the first exited before its checkpoint,
    or could not load its snapshot), on the taps hoplab still holds, and recorded for
    teardown as the first was."""
    vm = vms[b.node]
    first, vm.boot = vm.boot, b
    vm.started = qemu.start(b)
    _record(state, vm)
    state.summary["nodes"][b.node]["vm"]["start"] = \
        "booted" if first.restore is not None else "booted again"
    state.save()
    return vm.started


def known_hosts(state: LabState) -> Path:
    return state.rundir / KEYS_DIR / "known_hosts"


def info(entry: dict[str, Any]) -> dict[str, Any]:
    """A VM node's facts for run metadata: kernel release, vCPUs, accelerator, and the
    host CPU share if it has one."""
    vm = entry.get("vm") or {}
    return {k: vm[k] for k in ("kernel", "release", "vcpus", "accel", "cpu_pct")
            if vm.get(k) is not None}
