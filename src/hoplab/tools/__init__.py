"""Adapters for the measurement tools: argv builders and pure output parsers.

Nothing here runs a process; callers run the argv and hand the output text to ``parse``.
"""

from __future__ import annotations

import ipaddress
import json
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
