from __future__ import annotations

import pytest

from hoplab.spec.model import QueueLimit
from hoplab.spec.units import (
    parse_command,
    parse_delay,
    parse_percent,
    parse_queue,
    parse_rate,
    parse_size,
    parse_time,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("100mbit", 100_000_000),
        ("1gbit", 1_000_000_000),
        ("500kbit", 500_000),
        ("2.5Gbit", 2_500_000_000),
        ("64000bit", 64_000),
        ("1MBIT", 1_000_000),
        ("10 mbit", 10_000_000),
        ("1kibit", 1024),
        ("0.5mbit", 500_000),
        (9600, 9600),
        (1e6, 1_000_000),
    ],
)
def test_rate(text: object, bps: int) -> None:
    assert parse_rate(text) == bps
    assert isinstance(parse_rate(text), int)


@pytest.mark.parametrize("text", ["100mbps", "100MBps", "1kbps", "8bps", "10Mb/s"])
def test_rate_refuses_bytes_per_second(text: str) -> None:
    with pytest.raises(ValueError, match="bytes per second") as err:
        parse_rate(text)
    assert "mbit" in str(err.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("100", "unknown rate unit '(none)'"),
        ("100m", "has no unit; write e.g. '100mbit'"),
        ("fast", "is not a rate"),
        ("0mbit", "must be positive"),
        ("-5mbit", "must be positive"),
        (0, "must be positive"),
        (1.5, "must be whole"),
        (True, "got a boolean (True)"),
        ("10 furlongs", "unknown rate unit 'furlongs'"),
    ],
)
def test_rate_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_rate(value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20ms", 0.02),
        ("1s", 1.0),
        ("500us", 0.0005),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("2min", 120.0),
        ("1h", 3600.0),
        ("0ms", 0.0),
        ("250ns", 250e-9),
        ("3MS", 0.003),
    ],
)
def test_time(text: str, seconds: float) -> None:
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (20, "a time needs a unit"),
        ("20", "unknown time unit '(none)'"),
        ("20 days", "unknown time unit 'days'"),
        ("-1ms", "must not be negative"),
        ("soon", "is not a time"),
    ],
)
def test_time_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_time(value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64kb", 64_000),
        ("1mb", 1_000_000),
        ("1500b", 1500),
        ("32kib", 32 * 1024),
        ("1MiB", 1024 * 1024),
        ("1.5kb", 1500),
        (1500, 1500),
    ],
)
def test_size(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("64kbit", "is a number of bits"),
        ("64", "unknown size unit '(none)'"),
        ("1.5b", "not a whole number of bytes"),
        ("0kb", "must be positive"),
        (False, "got a boolean (False)"),
    ],
)
def test_size_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_size(value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("value", "pct"),
    [("1%", 1.0), (1, 1.0), (0.5, 0.5), ("0.25 %", 0.25), ("100%", 100.0), (0, 0.0)],
)
def test_percent(value: object, pct: float) -> None:
    assert parse_percent(value) == pct


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("101%", "between 0 and 100"),
        (-1, "between 0 and 100"),
        ("1", "not a percentage"),
        ("half", "not a percentage"),
        (True, "got a boolean (True)"),
    ],
)
def test_percent_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_percent(value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("value", "limit"),
    [
        (100, QueueLimit(packets=100)),
        ("100p", QueueLimit(packets=100)),
        ("50 packets", QueueLimit(packets=50)),
        ("64kb", QueueLimit(bytes=64_000)),
        ("32kib", QueueLimit(bytes=32_768)),
    ],
)
def test_queue(value: object, limit: QueueLimit) -> None:
    assert parse_queue(value) == limit


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (0, "must be positive"),
        ("1.5p", "positive whole number"),
        ("100", "or packets, e.g. '100p'"),
        (1.5, "must be packets"),
    ],
)
def test_queue_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_queue(value)
    assert fragment in str(err.value)


def test_command_string_is_split_not_shelled() -> None:
    assert parse_command("tc qdisc show dev 'eth 0' ; rm -rf /") == (
        "tc", "qdisc", "show", "dev", "eth 0", ";", "rm", "-rf", "/",
    )
    assert parse_command(["ip", "-br", "a"]) == ("ip", "-br", "a")


@pytest.mark.parametrize(("value", "fragment"),
                         [("", "empty command"), ([], "empty command"),
                          ("echo 'oops", "cannot split"), ([1], "a command is a string")])
def test_command_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_command(value)
    assert fragment in str(err.value)


@pytest.mark.parametrize(("parse", "value", "says"), [
    (parse_rate, "99999999999999999999tbit", "at most 34tbit"),
    (parse_rate, 1e99, "at most 34tbit"),
    (parse_rate, "34.000000000001tbit", "32-bit byte count"),
    (parse_time, "99999h", "at most 24h"),
    (parse_time, "86401s", "-t 86400"),
    (parse_delay, "61s", "at most 60s"),
    (parse_delay, "99999h", "at most 24h"),
    (parse_queue, 99999999999999, "at most 1000000 packets"),
    (parse_queue, "1000001p", "at most 1000000 packets"),
    (parse_queue, "4gib", "at most 4294967295 bytes"),
])
def test_values_past_what_the_tools_take_are_refused_with_why(parse: object, value: object,
                                                                says: str) -> None:
    assert callable(parse)
    with pytest.raises(ValueError, match=says.replace("-", r"\-")):
        parse(value)


def test_the_bounds_themselves_are_accepted() -> None:
    assert parse_rate("34tbit") == 34 * 10**12
    assert parse_time("24h") == 86400.0
    assert parse_delay("60s") == 60.0
    assert parse_queue(1_000_000) == QueueLimit(packets=1_000_000)
    assert parse_queue("4294967295b") == QueueLimit(bytes=2**32 - 1)
