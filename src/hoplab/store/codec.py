"""How series and raw outputs are kept: compressed little-endian float64 and zlib.

A series array is one format byte and a zlib stream of the array's float64
values, little-endian. Two layouts, chosen per array by compressing a sample
both ways and keeping the smaller:

  FORMAT_PLAIN     the values as they are. Best for values with few distinct
                   decimal patterns (RTTs rounded to a microsecond).
  FORMAT_SHUFFLED  byte-shuffled: first byte of every value, then the second
                   byte, and so on. Best for smooth values such as run times,
                   whose high bytes barely change (about 1 % of the raw size).

zlib level 1 (bench/store.py, 10^6 samples): times shuffled take 1 % of their raw
size, rounded RTTs 40 %, full-precision values 81 %. Level 6 makes rounded RTTs
33 % but encodes three times slower; lzma (preset 0) is smaller for rounded values
but encodes two to seven times slower and decodes up to ten times slower
(full-precision values), which every get_run would pay. Everything is float64, so
values load back bit for bit.
"""

from __future__ import annotations

import sys
import zlib
from array import array
from collections.abc import Sequence

FORMAT_PLAIN = 1
FORMAT_SHUFFLED = 2

_LEVEL = 1
_WIDTH = 8                  # bytes per float64
_SAMPLE = 65536             # values compressed both ways to pick the layout
_RAW_LEVEL = 6              # raw outputs are text: small, and compress well at 6


def _to_le_bytes(values: Sequence[float]) -> bytes:
    arr = values if isinstance(values, array) and values.typecode == "d" else array("d", values)
    if sys.byteorder == "big":
        arr = array("d", arr)
        arr.byteswap()
    return arr.tobytes()


def _shuffle(data: bytes) -> bytes:
    # Strided slices run in C: fast enough for millions of values without numpy.
    return b"".join(data[i::_WIDTH] for i in range(_WIDTH))


def _unshuffle(data: bytes) -> bytes:
    n = len(data) // _WIDTH
    out = bytearray(len(data))
    for i in range(_WIDTH):
        out[i::_WIDTH] = data[i * n:(i + 1) * n]
    return bytes(out)


def encode_floats(values: Sequence[float]) -> bytes:
    """Compress `values` (any sequence of floats) as float64; decode with decode_floats."""
    data = _to_le_bytes(values)
    sample = data[:_SAMPLE * _WIDTH]
    plain = len(zlib.compress(sample, _LEVEL))
    shuffled = len(zlib.compress(_shuffle(sample), _LEVEL))
    if shuffled < plain:
        return bytes([FORMAT_SHUFFLED]) + zlib.compress(_shuffle(data), _LEVEL)
    return bytes([FORMAT_PLAIN]) + zlib.compress(data, _LEVEL)


def decode_floats(blob: bytes, n: int) -> list[float]:
    """The n values encoded in `blob`; ValueError if it is not such an encoding."""
    if not blob:
        raise ValueError("empty series blob")
    fmt = blob[0]
    try:
        data = zlib.decompress(blob[1:])
    except zlib.error as exc:
        raise ValueError(f"corrupt series blob: {exc}") from exc
    if len(data) != n * _WIDTH:
        raise ValueError(f"series blob holds {len(data) // _WIDTH} values, expected {n}")
    if fmt == FORMAT_SHUFFLED:
        data = _unshuffle(data)
    elif fmt != FORMAT_PLAIN:
        raise ValueError(f"unknown series format {fmt}")
    arr = array("d")
    arr.frombytes(data)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tolist()


def compress_raw(data: bytes) -> bytes:
    return zlib.compress(data, _RAW_LEVEL)


def decompress_raw(blob: bytes) -> bytes:
    return zlib.decompress(blob)
