"""The kernel's PVH entry: its uncompressed ELF (vmlinux), which QEMU starts directly
in 32-bit protected mode, skipping the bzImage's real-mode setup and its
decompression of itself. Under TCG the decompression alone is about a second of a
6.12 boot (docs/vm.md). Extracted once from the bzImage's payload and cached by the
image's content; a kernel without the PVH note (CONFIG_PVH), or with a payload this
machine cannot decompress (lz4, lzo), boots from its bzImage as before."""

from __future__ import annotations

import bz2
import hashlib
import lzma
import struct
import zlib
from pathlib import Path

from hoplab.lab.vm import cache

ELF_MAGIC = b"\x7fELF"
PT_NOTE = 4
# The note Linux's PVH entry point is announced by (XEN_ELFNOTE_PHYS32_ENTRY).
XEN_ELFNOTE_PHYS32_ENTRY = 18
VMLINUX = "vmlinux"


def entry(image: Path) -> Path | None:
    """The PVH ELF of `image` (itself if it is one), made the first time; None when the
    kernel has no PVH entry or its payload cannot be unpacked here (remembered too)."""
    data = image.read_bytes()
    if data[:4] == ELF_MAGIC:
        return image if has_pvh_note(data) else None

    def make(tmp: Path) -> None:
        elf = payload_elf(data)
        if elf is not None and has_pvh_note(elf):
            (tmp / VMLINUX).write_bytes(elf)

    d = cache.entry(cache.cache_dir() / "pvh" / hashlib.sha256(data).hexdigest()[:16], make)
    return d / VMLINUX if (d / VMLINUX).is_file() else None


def payload_elf(bz: bytes) -> bytes | None:
    """The ELF a bzImage carries compressed (boot protocol 2.08 or later:
    payload_offset and payload_length in its setup header), or None."""
    if len(bz) < 0x250 or bz[0x202:0x206] != b"HdrS":
        return None
    version = struct.unpack_from("<H", bz, 0x206)[0]
    if version < 0x208:
        return None
    setup_sects = bz[0x1F1] or 4
    offset, length = struct.unpack_from("<II", bz, 0x248)
    start = (setup_sects + 1) * 512 + offset
    out = decompress(bz[start:start + length])
    return out if out is not None and out[:4] == ELF_MAGIC else None


def decompress(payload: bytes) -> bytes | None:
    """The payload decompressed by its magic; data after the stream (the kernel appends
    the uncompressed size) is ignored."""
    try:
        if payload[:2] == b"\x1f\x8b":
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(payload)
        if payload[:6] == b"\xfd7zXZ\x00":
            return lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(payload)
        if payload[:3] == b"\x5d\x00\x00":
            return lzma.LZMADecompressor(lzma.FORMAT_ALONE).decompress(payload)
        if payload[:3] == b"BZh":
            return bz2.BZ2Decompressor().decompress(payload)
        if payload[:4] == b"\x28\xb5\x2f\xfd":
            import zstandard  # only for zstd kernels (Debian's since 6.x)

            try:
                out: bytes = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
            except zstandard.ZstdError:
                return None
            return out
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error):
        return None
    return None


def has_pvh_note(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF has the PVH entry note in a PT_NOTE segment."""
    if len(elf) < 64 or elf[:4] != ELF_MAGIC or elf[4] != 2 or elf[5] != 1:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        p_type, = struct.unpack_from("<I", elf, at)
        if p_type != PT_NOTE:
            continue
        off, = struct.unpack_from("<Q", elf, at + 8)
        size, = struct.unpack_from("<Q", elf, at + 32)
        if _notes_have(elf[off:off + size], b"Xen\0", XEN_ELFNOTE_PHYS32_ENTRY):
            return True
    return False


def _notes_have(notes: bytes, name: bytes, kind: int) -> bool:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, ntype = struct.unpack_from("<III", notes, at)
        at += 12
        got = notes[at:at + namesz]
        at += (namesz + 3) & ~3
        at += (descsz + 3) & ~3
        if got == name and ntype == kind:
            return True
    return False
