"""Flame graphs with inferno: interactive SVG (hover, click to zoom, Ctrl-F search)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hoplab.errors import HoplabError
from hoplab.profile.tools import need


def _run(argv: Sequence[str], stdin: str, what: str) -> str:
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                          errors="replace", check=False)
    if proc.returncode != 0:
        raise HoplabError(f"{what} failed: {' '.join(proc.stderr.split())[:300]}")
    return proc.stdout


def flamegraph(folded: str, *, title: str, subtitle: str | None = None,
               icicle: bool = False, colors: str = "hot") -> str:
    if not folded.strip():
        raise HoplabError("no samples to draw")
    argv = [need("inferno-flamegraph"), "--title", title, "--colors", colors, "--hash"]
    if subtitle:
        argv += ["--subtitle", subtitle]
    if icicle:
        argv.append("--inverted")
    return _run(argv, folded, "inferno-flamegraph")


def diff(folded_a: str, folded_b: str, *, title: str, subtitle: str | None = None) -> str:
    """What grew from A to B in red, what shrank in blue, with both normalised to the same
    number of samples so a longer run does not look like growth everywhere."""
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.folded", Path(tmp) / "b.folded"
        a.write_text(folded_a)
        b.write_text(folded_b)
        merged = _run([need("inferno-diff-folded"), "--normalize", str(a), str(b)], "",
                      "inferno-diff-folded")
    return flamegraph(merged, title=title, subtitle=subtitle)
