"""Flame graphs with inferno: interactive SVG (hover, click to zoom, Ctrl-F search).

Drawn root on top (an icicle) unless asked upright: kernel stacks run 100 frames
deep and more, and drawn upright at inferno's 16 px a frame the root and the widest
frames, what a reader looks at first, sat 2,000 px down, below any window. Upright,
the frames are made as thin as needed for the root to stay within WINDOW_HEIGHT.

The differential graph is coloured here, not by inferno: inferno colours a frame by
the change of its self time, so a process that went from nothing to 82 % of the
samples, spread over hundreds of leaves, was drawn almost white while one idle leaf
that shrank was the strongest colour. Here a frame is coloured by the change of its
share of all samples, itself and everything it calls, and the largest change, up or
down, is the strongest red or blue.
"""

from __future__ import annotations

import bisect
import html
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hoplab.errors import HoplabError
from hoplab.profile.tools import need

WINDOW_HEIGHT = 800         # px: a 1280x800 window shows the root of an upright graph
_FRAME_HEIGHT = 16          # inferno's default, px
_MIN_FRAME_HEIGHT = 4
_CHROME = 110               # px above and below the frames: title, subtitle, status line


def _run(argv: Sequence[str], stdin: str, what: str) -> str:
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                          errors="replace", check=False)
    if proc.returncode != 0:
        raise HoplabError(f"{what} failed: {' '.join(proc.stderr.split())[:300]}")
    return proc.stdout


def _depth(folded: str) -> int:
    return max((line.rsplit(" ", 1)[0].count(";") + 1 for line in folded.splitlines()
                if line.strip()), default=0)


def frame_height(depth: int, upright: bool) -> int:
    """Pixels a frame: inferno's 16 in an icicle (the root is on top whatever the depth);
    upright, as many as let the root (one row below the deepest frame) and the chrome
    fit in WINDOW_HEIGHT, down to a minimum a pointer can still hover."""
    if not upright:
        return _FRAME_HEIGHT
    fit = (WINDOW_HEIGHT - _CHROME) // max(1, depth + 1)
    return max(_MIN_FRAME_HEIGHT, min(_FRAME_HEIGHT, fit))


def _argv(folded: str, title: str, subtitle: str | None, upright: bool,
          colors: str) -> list[str]:
    height = frame_height(_depth(folded), upright)
    argv = [need("inferno-flamegraph"), "--title", title, "--colors", colors, "--hash",
            "--height", str(height), "--fontsize", str(min(12, max(6, height - 4)))]
    if subtitle:
        argv += ["--subtitle", subtitle]
    if not upright:
        argv.append("--inverted")
    return argv


def flamegraph(folded: str, *, title: str, subtitle: str | None = None,
               upright: bool = False, colors: str = "hot") -> str:
    if not folded.strip():
        raise HoplabError("no samples to draw")
    return _run(_argv(folded, title, subtitle, upright, colors), folded,
                "inferno-flamegraph")


DIFF_NOTE = ("red: a larger share of the samples in B than in A, blue: a smaller one "
             "(each frame with all it calls); the strongest colour is the largest change")


def diff(folded_a: str, folded_b: str, *, title: str, subtitle: str | None = None,
         upright: bool = False) -> str:
    """B's stacks, each frame coloured by how its share of all samples changed from A to
    B (red grew, blue shrank, the largest change the strongest); hover says both shares.
    Shares, not counts: a longer run does not look like growth everywhere."""
    if not folded_b.strip():
        raise HoplabError("no samples to draw")
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.folded", Path(tmp) / "b.folded"
        a.write_text(folded_a)
        b.write_text(folded_b)
        merged = _run([need("inferno-diff-folded"), "--normalize", str(a), str(b)], "",
                      "inferno-diff-folded")
    svg = _run(_argv(folded_b, title, subtitle or DIFF_NOTE, upright, "hot"), merged,
               "inferno-flamegraph")
    return recolour(svg, shares(folded_a), shares(folded_b))


# What inferno leaves off a frame's name when it draws it: kernel, JIT, inlined, waker.
_ANNOTATION = re.compile(r"_\[[kjiw]\]$")


def shares(folded: str) -> dict[tuple[str, ...], float]:
    """Every stack prefix (root first) -> its share of all samples in %: the frame and
    everything it calls."""
    counts: dict[tuple[str, ...], float] = {}
    total = 0.0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        try:
            count = float(n)
        except ValueError:
            continue
        total += count
        frames = tuple(_ANNOTATION.sub("", f.strip()) for f in stack.split(";"))
        for i in range(1, len(frames) + 1):
            counts[frames[:i]] = counts.get(frames[:i], 0.0) + count
    return {k: 100 * v / total for k, v in counts.items()} if total else {}


# One frame of inferno's SVG: <g><title>NAME (N samples, P%...)</title><rect x=.. y=..
# .. fill="rgb(..)" fg:x="OFFSET" fg:w="WIDTH"/>...
_FRAME = re.compile(r'<g><title>(?P<title>[^<]*)</title><rect (?P<attrs>[^>]*?)/>')
_ATTR = re.compile(r'([\w:]+)="([^"]*)"')


def _frames(svg: str) -> list[tuple[re.Match[str], str, float, float, float]]:
    """(match, name, y, offset, width) of every frame, in the order of the SVG."""
    out = []
    for m in _FRAME.finditer(svg):
        attrs = dict(_ATTR.findall(m.group("attrs")))
        if not {"y", "fg:x", "fg:w"} <= attrs.keys():
            continue
        name = html.unescape(m.group("title")).rsplit(" (", 1)[0].strip()
        out.append((m, name, float(attrs["y"]), float(attrs["fg:x"]), float(attrs["fg:w"])))
    return out


def _paths(frames: Sequence[tuple[re.Match[str], str, float, float, float]]
           ) -> list[tuple[str, ...] | None]:
    """Each frame's stack, root first (None for the root "all"), from the layout: a
    frame's parent is the frame one row nearer the root whose samples span it."""
    rows = sorted({y for _, _, y, _, _ in frames})
    root_y = next((y for _, name, y, x, _ in frames if name == "all" and x == 0), rows[-1])
    # The root is the top row of an icicle and the bottom row of an upright graph.
    order = rows if root_y == rows[0] else rows[::-1]
    depth = {y: i for i, y in enumerate(order)}
    by_depth: dict[int, list[tuple[float, float, int]]] = {}
    for i, (_, _, y, x, w) in enumerate(frames):
        by_depth.setdefault(depth[y], []).append((x, w, i))
    for row in by_depth.values():
        row.sort()
    paths: list[tuple[str, ...] | None] = [None] * len(frames)
    for d in sorted(by_depth)[1:]:
        above = by_depth.get(d - 1, [])
        starts = [x for x, _, _ in above]
        for x, _, i in by_depth[d]:
            k = bisect.bisect_right(starts, x) - 1
            parent = paths[above[k][2]] if k >= 0 else None
            paths[i] = (*(parent or ()), frames[i][1])
    return paths


def _colour(change: float, largest: float) -> str:
    """White for no change, up to rgb(255,50,50) (grew) or rgb(50,50,255) (shrank) for
    the largest change."""
    ratio = min(1.0, abs(change) / largest) if largest > 0 else 0.0
    c = round(250 - 200 * ratio)
    return f"rgb(255,{c},{c})" if change > 0 else f"rgb({c},{c},255)" if change < 0 \
        else "rgb(250,250,250)"


def recolour(svg: str, a: dict[tuple[str, ...], float], b: dict[tuple[str, ...], float]
             ) -> str:
    """`svg` (inferno's drawing of B's stacks) with every frame coloured by the change of
    its share of all samples from A (`a`, shares()) to B, and its tooltip saying both."""
    frames = _frames(svg)
    paths = _paths(frames)
    changes = [None if p is None else b.get(p, 0.0) - a.get(p, 0.0) for p in paths]
    largest = max((abs(c) for c in changes if c is not None), default=0.0)
    out, last = [], 0
    for (m, name, _, _, w), path, change in zip(frames, paths, changes, strict=True):
        if path is None or change is None:
            continue
        title = (f"{name} ({w:,.0f} samples; {a.get(path, 0.0):.2f} % of A, "
                 f"{b.get(path, 0.0):.2f} % of B, {change:+.2f} points)")
        attrs = re.sub(r'fill="[^"]*"', f'fill="{_colour(change, largest)}"', m.group("attrs"))
        out += [svg[last:m.start()],
                f"<g><title>{html.escape(title, quote=False)}</title><rect {attrs}/>"]
        last = m.end()
    out.append(svg[last:])
    return "".join(out)
