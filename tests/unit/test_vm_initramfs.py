"""The initramfs cache is keyed by what the image holds: a changed /init (this session
moved the guest's set-up into it) is never booted from an image cached before, which
would skip the set-up and leave the VM without its management address."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.lab.vm import cache, initramfs
from hoplab.lab.vm.kernel import Kernel


def _key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    seen: list[Path] = []

    def entry(path: Path, make: object) -> Path:
        seen.append(path)
        return path

    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(cache, "entry", entry)
    initramfs.image(Kernel("6.12.100+deb12-amd64", tmp_path / "vmlinuz", None,
                           "debian:6.12.100+deb12-amd64"))
    return seen[0].name


def test_the_cache_key_changes_with_init_and_modules(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    first = _key(monkeypatch, tmp_path)
    assert first.startswith("initramfs-6.12.100+deb12-amd64-")
    assert _key(monkeypatch, tmp_path) == first
    monkeypatch.setattr(initramfs, "INIT", initramfs.INIT + "# changed\n")
    second = _key(monkeypatch, tmp_path)
    monkeypatch.setattr(initramfs, "MODULES", (*initramfs.MODULES, "sch_fq_codel"))
    assert len({first, second, _key(monkeypatch, tmp_path)}) == 3


def test_init_sets_the_guest_up_before_the_ssh_server() -> None:
    # The management NIC (virtio_net) is loaded from the initramfs, and its address is
    # set by BusyBox before switch_root (no exec over 9p before the banner but stage2's).
    assert "virtio_net" in initramfs.MODULES and "sys" in initramfs.DIRS
    init = initramfs.INIT
    assert init.index(f"ip addr add {initramfs.MGMT_ADDR}") < init.index(initramfs.READY) \
        < init.index("exec switch_root")


KEY_OF_A_BUILD = """
import sys
from pathlib import Path
from hoplab.lab.vm import cache, initramfs
from hoplab.lab.vm.kernel import Kernel
cache.entry = lambda path, make: path
cache.cache_dir = lambda: Path(sys.argv[1])
d = Path(sys.argv[1])
k = Kernel("6.13.0-rc1", d / "bzImage", d / "modules", str(d / "bzImage"))
print(initramfs.image(k).parent.name)
"""


def _build_key(tmp_path: Path, seed: str) -> str:
    out = subprocess.run([sys.executable, "-c", KEY_OF_A_BUILD, str(tmp_path)], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": seed})
    return out.stdout.strip()


def test_a_users_build_has_one_key_in_every_process_and_a_new_one_when_rebuilt(
        tmp_path: Path) -> None:
    (tmp_path / "bzImage").write_bytes(b"kernel one")
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "modules.dep").write_text("kernel/net/a.ko:\n")
    first = _build_key(tmp_path, "1")
    assert first.startswith("initramfs-6.13.0-rc1-")
    assert _build_key(tmp_path, "2") == first
    # Rebuilt in place (a bisection step): the image and its modules.dep are new files.
    (tmp_path / "bzImage").write_bytes(b"kernel two, longer")
    (tmp_path / "modules" / "modules.dep").write_text("kernel/net/a.ko:\nkernel/net/b.ko:\n")
    assert _build_key(tmp_path, "1") != first
