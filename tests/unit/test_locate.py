from __future__ import annotations

import tomllib

import pytest

from hoplab.spec.locate import Locator, locate, split_syntax_error

DOC = '''\
# a comment with [brackets] and = signs
name = "x"   # trailing [comment]

[nodes.client]
[nodes.r1]
forward = true
sysctls = { "net.ipv4.ip_forward" = 1, 'net.ipv6.x' = "0" }
setup = [
  ["ip", "link", "set", "[not-a-table]"],
  "echo 'hi [there]'",
]

[nodes."quoted name"]
nat.out = "r2"

[[links]]
between = ["client", "r1"]
note = """
[[links]]
rate = "this is a string, not a table"
"""

[[links]]
between = ["r1", "server"]
rate = "100mbit"
forward = { delay = "5ms", loss = 1 }
addresses = [
  "10.0.0.1/30",
  "10.0.0.2/30" ]

[generate]
chain = 3

[[links]]
between = ["a", "b"]
literal = \'\'\'[fake]
x = 1\'\'\'

[a.b]
c = 1
[a]
d = 2

[[t]]
x = 1
[[t.sub]]
y = 1
[[t.sub]]
y = 2
[[t]]
[[t.sub]]
y = 3
'''


def test_doc_is_valid_toml() -> None:
    tomllib.loads(DOC)


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("name",), 2),
        (("nodes",), 4),
        (("nodes", "client"), 4),
        (("nodes", "r1"), 5),
        (("nodes", "r1", "forward"), 6),
        (("nodes", "r1", "sysctls"), 7),
        (("nodes", "r1", "sysctls", "net.ipv4.ip_forward"), 7),
        (("nodes", "r1", "sysctls", "net.ipv6.x"), 7),
        (("nodes", "r1", "setup"), 8),
        (("nodes", "r1", "setup", 0), 9),
        (("nodes", "r1", "setup", 0, 3), 9),
        (("nodes", "r1", "setup", 1), 10),
        (("nodes", "quoted name"), 13),
        (("nodes", "quoted name", "nat"), 14),
        (("nodes", "quoted name", "nat", "out"), 14),
        (("links",), 16),
        (("links", 0), 16),
        (("links", 0, "between"), 17),
        (("links", 0, "note"), 18),
        (("links", 1), 23),
        (("links", 1, "rate"), 25),
        (("links", 1, "forward"), 26),
        (("links", 1, "forward", "delay"), 26),
        (("links", 1, "forward", "loss"), 26),
        (("links", 1, "addresses"), 27),
        (("links", 1, "addresses", 0), 28),
        (("links", 1, "addresses", 1), 29),
        (("generate",), 31),
        (("generate", "chain"), 32),
        (("links", 2), 34),
        (("links", 2, "literal"), 36),
        (("a", "b"), 39),
        (("a", "b", "c"), 40),
        (("a",), 41),
        (("a", "d"), 42),
        (("t", 0, "x"), 45),
        (("t", 0, "sub", 0, "y"), 47),
        (("t", 0, "sub", 1), 48),
        (("t", 0, "sub", 1, "y"), 49),
        (("t", 1), 50),
        (("t", 1, "sub", 0, "y"), 52),
    ],
)
def test_lines(path: tuple[str | int, ...], line: int) -> None:
    assert Locator(DOC).line(path) == line


@pytest.mark.parametrize(
    ("path", "line"),
    [
        # Missing keys fall back to the nearest enclosing table or key.
        (("links", 2, "rate"), 34),
        (("nodes", "client", "sysctls"), 4),
        (("nodes", "r1", "sysctls", "net.core.x"), 7),
        (("links", 1, "forward", "jitter"), 26),
        (("generate", "chain", "extra"), 32),
        (("links", 9, "rate"), 16),
    ],
)
def test_fallback(path: tuple[str | int, ...], line: int) -> None:
    assert locate(DOC, path) == line


def test_unknown_top_level_is_none() -> None:
    assert locate(DOC, ("tunnels", 0)) is None
    assert locate(DOC, ()) is None


def test_dotted_keys_and_implicit_parents() -> None:
    text = 'x = 1\nnodes.r1.forward = true\n\n[nodes.r2]\n'
    loc = Locator(text)
    assert loc.line(("nodes", "r1", "forward")) == 2
    assert loc.line(("nodes", "r1")) == 2
    assert loc.line(("nodes", "r2")) == 4


def test_crlf_and_escapes_in_keys() -> None:
    text = 'a = 1\r\n[nodes."we\\"ird"]\r\n"k\\u0041" = 2\r\n'
    assert tomllib.loads(text)["nodes"]['we"ird'] == {"kA": 2}
    assert locate(text, ("nodes", 'we"ird')) == 2
    assert locate(text, ("nodes", 'we"ird', "kA")) == 3


def test_broken_input_never_raises() -> None:
    text = '[nodes.a]\nforward = true\n[[links]\nbetween = ["a"'
    loc = Locator(text)
    assert loc.line(("nodes", "a", "forward")) == 2
    # An unclosed header is read as far as it goes.
    assert loc.line(("links", 0, "between")) == 4
    assert Locator('x = """never closed').line(("x",)) == 1


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[nodes.x]\n[nodes.x]\n", 2),
        # "At end of document" names the last line that has text.
        ("a = 1\nb = [1,\n", 2),
        ("a = 1\nb = [1,", 2),
        ("a = 1\n\nb = = 2\n", 3),
    ],
)
def test_split_syntax_error(text: str, line: int) -> None:
    with pytest.raises(tomllib.TOMLDecodeError) as err:
        tomllib.loads(text)
    message, got = split_syntax_error(str(err.value), text)
    assert got == line
    assert "(at " not in message


def test_split_syntax_error_without_location() -> None:
    assert split_syntax_error("odd", "x") == ("odd", None)
