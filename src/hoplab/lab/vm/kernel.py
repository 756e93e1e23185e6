"""The kernel a VM boots: `debian:RELEASE`, fetched from Debian's packages as
`apt-get download` fetches them and unpacked with its modules into the cache (keyed by
release, made once), or a path to a bzImage the user built (with `modules`, its
lib/modules/RELEASE directory)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from hoplab.errors import CapabilityError, UsageError
from hoplab.lab.vm import cache, pvh

DEBIAN = "debian:"
_RELEASE = re.compile(r"^[0-9][0-9A-Za-z.+~_-]*$")


@dataclass(frozen=True)
class Kernel:
    release: str
    image: Path
    # Its lib/modules/RELEASE directory (with modules.dep), None: a kernel without
    # modules (everything a lab needs built in).
    modules: Path | None
    source: str
    # What QEMU's -kernel loads: the uncompressed ELF with its PVH entry when the kernel
    # has one (pvh.py: no real-mode setup, no decompression under TCG), else `image`.
    entry: Path | None = None

    @property
    def boot_image(self) -> Path:
        return self.entry or self.image


def resolve(spec: str, modules: str | None = None) -> Kernel:
    """The kernel `spec` names, fetched and unpacked the first time."""
    k = _resolve(spec, modules)
    return replace(k, entry=pvh.entry(k.image))


def _resolve(spec: str, modules: str | None) -> Kernel:
    if spec.startswith(DEBIAN):
        return debian(spec.removeprefix(DEBIAN))
    image = Path(spec).expanduser()
    if not image.is_file():
        raise UsageError(f"kernel {spec!r}: no such file (a bzImage, or debian:RELEASE)")
    mods = Path(modules).expanduser() if modules else None
    if mods is not None and not (mods / "modules.dep").is_file():
        raise UsageError(f"modules {modules!r}: no modules.dep there (a lib/modules/RELEASE "
                         f"directory after `make modules_install`)")
    release = mods.name if mods is not None else image_release(image)
    return Kernel(release, image, mods, spec)


def image_release(image: Path) -> str:
    """The release a bzImage carries in its setup header (the kernel_version field)."""
    data = image.read_bytes()[:0x10000]
    if data[0x202:0x206] != b"HdrS":
        raise UsageError(f"kernel {image}: not a bzImage (no setup header)")
    at = int.from_bytes(data[0x20E:0x210], "little") + 0x200
    return data[at:data.index(b"\0", at)].decode(errors="replace").split()[0]


def debian(release: str) -> Kernel:
    if not _RELEASE.match(release):
        raise UsageError(f"kernel debian:{release}: not a kernel release "
                         f"(e.g. debian:6.12.100+deb12-amd64)")
    root = cache.entry(debian_dir(release), lambda tmp: _unpack(release, tmp))
    return Kernel(release, root / "boot" / f"vmlinuz-{release}",
                  root / "lib" / "modules" / release, DEBIAN + release)


def debian_dir(release: str) -> Path:
    """Where Debian's kernel `release` is unpacked in the cache."""
    return cache.cache_dir() / "kernels" / f"debian-{release}"


def _run(argv: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    except FileNotFoundError as exc:
        raise CapabilityError(f"{what}: {argv[0]} is missing ({exc})") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise CapabilityError(f"{what}: {' '.join(argv)}: exit {done.returncode}: {tail}")


def _unpack(release: str, tmp: Path) -> None:
    package = f"linux-image-{release}"
    what = f"kernel debian:{release}"
    # apt drops to its own user to download; it must be able to write here.
    tmp.chmod(0o755)
    _run(["apt-get", "download", "-q", package], tmp, what)
    debs = list(tmp.glob(f"{package}_*.deb"))
    if not debs:
        raise CapabilityError(f"{what}: apt-get download left no {package} package")
    _run(["dpkg-deb", "-x", str(debs[0]), "."], tmp, what)
    for deb in debs:
        deb.unlink()
    # Debian makes modules.dep at install time; the guest's modprobe needs it.
    _run(["depmod", "-b", str(tmp), release], tmp, what)
