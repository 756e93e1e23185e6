"""Adapters for the measurement tools: argv builders and pure output parsers.

Nothing here runs a process; callers run the argv and hand the output text to ``parse``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from pathlib import Path
from typing import Any

from hoplab.errors import HoplabError


class ToolOutputError(HoplabError):
    """A tool printed something its parser cannot read (not JSON, truncated, inconsistent)."""


def check_family(tool: str, host: str, ipv6: bool) -> None:
    """Reject an address literal of the other family: -4/-6 would make the tool fail late."""
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return  # a name: -4/-6 picks which of its addresses is used
    if (addr.version == 6) != ipv6:
        want = "IPv6" if ipv6 else "IPv4"
        raise ValueError(f"{tool}: host {host} is not an {want} address (ipv6={ipv6})")


def load_json(tool: str, text: str) -> dict[str, Any]:
    """Decode a tool's JSON report; the error names the tool and the offending line."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        line = lines[e.lineno - 1].strip()[:60] if 0 < e.lineno <= len(lines) else ""
        raise ToolOutputError(f"{tool}: output is not JSON (line {e.lineno}: {line!r}: "
                              f"{e.msg})") from None
    if not isinstance(doc, dict):
        raise ToolOutputError(f"{tool}: output is JSON but not an object")
    return doc


def built_binary(name: str, env: str, crate: str) -> Path | None:
    """Where one of hoplab's own Rust programs is: $`env`, next to the Python interpreter
    (make setup installs it into the venv), or its crate's release build in the
    repository (`crate`: the crate's directory there)."""
    repo_build = Path(__file__).resolve().parents[3] / crate / "target" / "release" / name
    chosen = os.environ.get(env)
    candidates = [Path(chosen)] if chosen else []
    candidates += [Path(sys.executable).with_name(name), repo_build]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None
