"""The differential flame graph shows the biggest change as the strongest colour, and a
flame graph of deep kernel stacks keeps its root in a 1280x800 window (issue 19).

Known answer: A runs an application and the idle loop; in B a process absent from A
(wireguard-go) takes 80 % of the samples, spread over 40 leaves of 2 % each, as a
real wireguard-go profile spreads over hundreds. Coloured by self time (inferno's
own way), each leaf grew by 2 points and the process frame by 0: almost white."""

from __future__ import annotations

import re

import pytest

from hoplab.profile.flamegraph import WINDOW_HEIGHT, diff, flamegraph, shares
from hoplab.profile.tools import find

pytestmark = pytest.mark.skipif(find("inferno-flamegraph") is None,
                                reason="inferno is installed by make setup")

A = "app;main;work 600\nswapper;cpu_idle 400\n"
WG = "wireguard-go;[wireguard-go];entry_SYSCALL_64_[k];do_syscall_64_[k]"
B = ("app;main;work 100\nswapper;cpu_idle 100\n"
     + "".join(f"{WG};leaf{i:02d}_[k] 20\n" for i in range(40)))

FRAME = re.compile(r'<g><title>([^<]*)</title><rect [^>]*?fill="rgb\((\d+),(\d+),(\d+)\)"')


def frames(svg: str) -> list[tuple[str, tuple[int, int, int]]]:
    return [(t, (int(r), int(g), int(b))) for t, r, g, b in FRAME.findall(svg)]


def redness(rgb: tuple[int, int, int]) -> int:
    r, g, b = rgb
    return r - min(g, b)


def test_a_process_that_appears_is_the_strongest_red() -> None:
    found = frames(diff(A, B, title="A -> B"))
    by_name = {t.split(" (")[0]: (t, rgb) for t, rgb in found}
    title, rgb = by_name["wireguard-go"]
    assert rgb == (255, 50, 50)                  # the largest change: the strongest colour
    assert "0.00 % of A, 80.00 % of B, +80.00 points" in title
    # Every other frame is weaker: its own leaves (2 points each) are pale.
    others = [redness(c) for t, c in found if not t.startswith(("wireguard-go ", "[wireguard-go]",
                                                                 "entry_SYSCALL_64 ",
                                                                 "do_syscall_64 "))]
    assert max(others) < redness(rgb)
    leaf_title, leaf = by_name["leaf07"]
    assert "+2.00 points" in leaf_title and leaf == (255, 245, 245)   # 2/80 of the range
    # What shrank is blue, by its share: work 60 % -> 10 %, the idle loop 40 % -> 10 %.
    work_title, work = by_name["work"]
    assert "60.00 % of A, 10.00 % of B, -50.00 points" in work_title
    assert work == (125, 125, 255)
    idle_title, idle = by_name["cpu_idle"]
    assert "-30.00 points" in idle_title and idle == (175, 175, 255)


def test_shares_count_a_frame_with_all_it_calls() -> None:
    got = shares(B)
    assert got[("wireguard-go",)] == pytest.approx(80.0)
    assert got[("wireguard-go", "[wireguard-go]", "entry_SYSCALL_64")] == pytest.approx(80.0)
    assert got[("app", "main", "work")] == pytest.approx(10.0)


def deep(depth: int) -> str:
    return "".join(f"{';'.join(f'p{k}f{i}' for i in range(depth))} {10 + k}\n" for k in range(5))


def root_box(svg: str) -> tuple[float, float, float]:
    """(svg width, root frame's top, its bottom) in px."""
    width = float(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    m = re.search(r'<title>all \([^<]*</title><rect [^>]*y="([\d.]+)" [^>]*height="([\d.]+)"',
                  svg)
    assert m is not None
    return width, float(m.group(1)), float(m.group(1)) + float(m.group(2))


@pytest.mark.parametrize("upright", [False, True])
def test_deep_stacks_keep_the_root_in_a_1280x800_window(upright: bool) -> None:
    # 128 frames: the depth perf's call graphs reach in a wireguard-go run.
    svg = flamegraph(deep(128), title="deep", upright=upright)
    width, top, bottom = root_box(svg)
    assert width <= 1280 and top >= 0 and bottom <= WINDOW_HEIGHT
    if not upright:
        assert top < 100                         # an icicle: the root is the top row
    diffed = diff(deep(128), deep(128).replace(" 10\n", " 90\n"), title="d", upright=upright)
    assert root_box(diffed)[2] <= WINDOW_HEIGHT
