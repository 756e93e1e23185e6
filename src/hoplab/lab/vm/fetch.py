"""What labs' VMs boot, made before a `lab up` needs it (`hoplab lab fetch`): each
kernel VM's kernel (Debian's fetched and unpacked, a user's own build read), its PVH
entry, its initramfs, and which accelerator boots a guest here (KVM tried once). The
first `lab up` would make the same entries; made ahead, a bench's first run or a test
suite starts at once, and a machine that is to go offline keeps what its labs boot.
A firmware image needs nothing: it boots as it is."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from hoplab.lab.vm import accel, initramfs, kernel, qemu
from hoplab.spec.model import Lab


@dataclass(frozen=True)
class Fetched:
    release: str
    took_s: float
    # The kernel was in the cache before (its initramfs and PVH entry may have been made).
    was_cached: bool


def kernels(labs: Iterable[Lab]) -> list[tuple[str, str | None]]:
    """The distinct (kernel, modules) of the labs' kernel VMs, in the order first met."""
    seen: dict[tuple[str, str | None], None] = {}
    for lab in labs:
        for node in lab.nodes:
            if node.vm is not None and node.vm.kernel is not None:
                seen.setdefault((node.vm.kernel, node.vm.modules), None)
    return list(seen)


def fetch(spec: str, modules: str | None) -> tuple[Fetched, kernel.Kernel]:
    """The kernel, its PVH entry and its initramfs, made now where not in the cache."""
    t0 = time.monotonic()
    before = _cached(spec)
    k = kernel.resolve(spec, modules)
    initramfs.image(k)
    return Fetched(k.release, time.monotonic() - t0, before), k


def accelerator(k: kernel.Kernel) -> tuple[str, str]:
    """(accelerator, why), as a boot of `k` would choose it (KVM tried the first time)."""
    chosen = accel.choose(k.image, initramfs.image(k), qemu.binary())
    why = (accel.remembered() or {}).get("why", "HOPLAB_VM_ACCEL")
    return chosen, why


def _cached(spec: str) -> bool:
    """Whether the kernel is here already: a path always is, Debian's once unpacked."""
    if not spec.startswith(kernel.DEBIAN):
        return True
    return kernel.debian_dir(spec.removeprefix(kernel.DEBIAN)).exists()
