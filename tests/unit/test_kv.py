"""The one KEY=VALUE parser and its messages."""

from __future__ import annotations

import pytest

from hoplab import kv
from hoplab.errors import UsageError


def test_split_strips_and_keeps_further_equals_signs() -> None:
    assert kv.split(" hops = 2 ", "--filter", "hops=2") == ("hops", "2")
    assert kv.split("cmd=a=b", "--label", "x=y") == ("cmd", "a=b")
    assert kv.split("note=", "--set", "hops=2", empty_value=True) == ("note", "")


@pytest.mark.parametrize(("item", "problem"), [
    ("hops", "no '='"),
    ("=2", "no key before '='"),
    (" = 2", "no key before '='"),
    ("hops=", "no value after '='"),
    ("hops= ", "no value after '='"),
])
def test_split_names_the_item_and_what_is_wrong(item: str, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        kv.split(item, "--filter", "--filter hops=2")
    assert str(info.value) == (f"--filter {item.strip()!r}: {problem}; expected KEY=VALUE, "
                               "e.g. --filter hops=2")
    assert info.value.exit_code == 2


def test_parse() -> None:
    assert kv.parse(["hops=2", "qos=on", "hops=2"], "--filter", "hops=2") == \
        {"hops": "2", "qos": "on"}
    assert kv.parse([], "--filter", "hops=2") == {}
    with pytest.raises(UsageError, match=r"^--label 'device=b': device is given twice "
                                         r"\(a and b\); a key takes one value$"):
        kv.parse(["device=a", "device=b"], "--label", "device=rpi4")
    with pytest.raises(UsageError, match=r"^--label 'x': no '='"):
        kv.parse(["device=a", "x"], "--label", "device=rpi4")


def test_no_other_key_value_parser() -> None:
    """KEY=VALUE from users is read by hoplab.kv only (it was parsed in seven places,
    each accepting and saying something else). WireGuard's UAPI lines are a protocol."""
    from pathlib import Path

    import hoplab

    root = Path(hoplab.__file__).parent
    allowed = {root / "kv.py", root / "lab" / "wireguard" / "uapi.py"}
    found = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py"))
             if p not in allowed and 'partition("=")' in p.read_text()]
    assert found == []
