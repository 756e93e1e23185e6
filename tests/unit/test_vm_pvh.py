"""A kernel's PVH entry (hoplab.lab.vm.pvh): the ELF note, the bzImage's payload in each
compression a kernel is built with, and the cache that unpacks it once."""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
from pathlib import Path

import pytest
import zstandard

from hoplab.lab.vm import pvh, qemu
from hoplab.lab.vm.kernel import Kernel


def note(name: bytes, kind: int, desc: bytes = b"\0" * 4) -> bytes:
    pad = (-len(name)) % 4
    return struct.pack("<III", len(name), len(desc), kind) + name + b"\0" * pad + desc


def elf(notes: bytes) -> bytes:
    """An ELF64 little-endian header, one PT_NOTE program header, the notes."""
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    head[4], head[5] = 2, 1
    struct.pack_into("<Q", head, 0x20, 64)          # e_phoff
    struct.pack_into("<HH", head, 0x36, 56, 1)      # e_phentsize, e_phnum
    ph = struct.pack("<IIQQQQQQ", pvh.PT_NOTE, 4, 120, 0, 0, len(notes), len(notes), 4)
    return bytes(head) + ph + notes


PVH_ELF = elf(note(b"Linux\0", 6) + note(b"Xen\0", pvh.XEN_ELFNOTE_PHYS32_ENTRY))


def bzimage(payload: bytes) -> bytes:
    """A bzImage of boot protocol 2.15: 2 setup sectors, then the payload 16 bytes into
    the protected-mode part (as the kernel's own header gives payload_offset)."""
    head = bytearray(3 * 512 + 16)
    head[0x1F1] = 2
    head[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", head, 0x206, 0x20F)
    struct.pack_into("<II", head, 0x248, 16, len(payload))
    return bytes(head) + payload + b"tail of the image"


def test_the_pvh_note_is_found_only_where_it_is() -> None:
    assert pvh.has_pvh_note(PVH_ELF)
    assert not pvh.has_pvh_note(elf(note(b"Xen\0", 17) + note(b"Linux\0", 18)))
    assert not pvh.has_pvh_note(b"MZ" + bytes(100))


@pytest.mark.parametrize("pack", [
    gzip.compress,
    lambda d: lzma.compress(d, format=lzma.FORMAT_XZ),
    lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE),
    bz2.compress,
    # The kernel appends the uncompressed size after a zstd frame.
    lambda d: zstandard.ZstdCompressor().compress(d) + struct.pack("<I", len(d)),
], ids=["gzip", "xz", "lzma", "bzip2", "zstd"])
def test_each_compression_gives_back_the_elf(pack: object) -> None:
    assert callable(pack)
    assert pvh.payload_elf(bzimage(pack(PVH_ELF))) == PVH_ELF


def test_unpacked_once_and_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    monkeypatch.setenv("HOPLAB_CACHE_DIR", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(gzip.compress(PVH_ELF)))
    got = pvh.entry(image)
    assert got is not None and got.read_bytes() == PVH_ELF

    def unpacked_again(_: bytes) -> bytes:
        raise AssertionError("unpacked a second time")

    monkeypatch.setattr(pvh, "payload_elf", unpacked_again)
    assert pvh.entry(image) == got
    # An ELF kernel is its own entry.
    (tmp_path / "vmlinux").write_bytes(PVH_ELF)
    assert pvh.entry(tmp_path / "vmlinux") == tmp_path / "vmlinux"


def test_no_entry_boots_the_bzimage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOPLAB_CACHE_DIR", str(tmp_path / "cache"))
    lz4 = tmp_path / "lz4"
    lz4.write_bytes(bzimage(b"\x02\x21\x4c\x18" + bytes(64)))  # not unpacked here
    no_note = tmp_path / "no-note"
    no_note.write_bytes(bzimage(gzip.compress(elf(note(b"Linux\0", 6)))))
    for image in (lz4, no_note):
        assert pvh.entry(image) is None
        k = Kernel("6.9", image, None, str(image))
        b = qemu.Boot("r1", k, tmp_path / "initrd", 2, "512M", "tcg", 40022, tmp_path)
        argv = qemu.argv(b, ctl=qemu.Control(3, 4))
        assert argv[argv.index("-kernel") + 1] == str(image)


def test_qemu_starts_the_entry(tmp_path: Path) -> None:
    k = Kernel("6.9", tmp_path / "bzImage", None, "x", entry=tmp_path / "vmlinux")
    b = qemu.Boot("r1", k, tmp_path / "initrd", 2, "512M", "tcg", 40022, tmp_path)
    argv = qemu.argv(b, ctl=qemu.Control(3, 4))
    assert argv[argv.index("-kernel") + 1] == str(tmp_path / "vmlinux")
    # SeaBIOS: qboot gives the guest no ACPI table for its VM generation ID.
    assert "-bios" not in argv and "vmgenid,guid=auto" in argv
