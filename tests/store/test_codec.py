from __future__ import annotations

import math
import random
import struct
import zlib

import pytest

from hoplab.store import codec


def _same(a: list[float], b: list[float]) -> bool:
    # Bit for bit: NaN != NaN and -0.0 == 0.0 would hide a lossy encoding.
    return [struct.pack("<d", x) for x in a] == [struct.pack("<d", x) for x in b]


_RNG = random.Random(1)


@pytest.mark.parametrize("values", [
    [],
    [1.5],
    [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308],
    [_RNG.gauss(20.0, 3.0) for _ in range(10_000)],
    [round(_RNG.uniform(1, 50), 3) for _ in range(10_000)],
    [i * 0.01 for i in range(100_000)],
])
def test_floats_round_trip_bit_for_bit(values: list[float]) -> None:
    blob = codec.encode_floats(values)
    assert _same(codec.decode_floats(blob, len(values)), values)


def test_ints_come_back_as_equal_floats() -> None:
    back = codec.decode_floats(codec.encode_floats([1, 2, 3]), 3)
    assert back == [1.0, 2.0, 3.0]
    assert all(isinstance(x, float) for x in back)


def test_layout_is_chosen_per_array() -> None:
    times = [i * 0.001 for i in range(50_000)]
    rng = random.Random(3)
    rtts = [round(rng.gauss(20, 2), 3) for _ in range(50_000)]
    assert codec.encode_floats(times)[0] == codec.FORMAT_SHUFFLED
    assert codec.encode_floats(rtts)[0] == codec.FORMAT_PLAIN
    # Regular times compress to a few percent of their 8 bytes a value.
    assert len(codec.encode_floats(times)) < 0.05 * 8 * len(times)


def test_format_is_little_endian_float64() -> None:
    values = [1.0, 2.0, 1e300, -3.25]
    blob = codec.encode_floats(values)
    expected = struct.pack("<4d", *values)
    if blob[0] == codec.FORMAT_SHUFFLED:
        expected = b"".join(expected[i::8] for i in range(8))
    assert zlib.decompress(blob[1:]) == expected


@pytest.mark.parametrize(("blob", "n", "message"), [
    (b"", 0, "empty"),
    (b"\x01not zlib", 1, "corrupt"),
    (bytes([1]) + zlib.compress(b"\0" * 16), 3, "holds 2 values, expected 3"),
    (bytes([9]) + zlib.compress(b"\0" * 8), 1, "unknown series format 9"),
])
def test_bad_blobs_are_refused(blob: bytes, n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        codec.decode_floats(blob, n)


def test_raw_round_trip() -> None:
    data = b'{"end": {"sum": 1}}\n' * 1000
    blob = codec.compress_raw(data)
    assert len(blob) < len(data) / 10
    assert codec.decompress_raw(blob) == data
