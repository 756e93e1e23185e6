"""The kinds hoplab ships, registered in the order they are listed (in errors and docs)."""

from __future__ import annotations

import importlib

BUILTIN = ("tcp", "udp", "ping", "probe", "rrul", "custom", "web")

for _name in BUILTIN:
    importlib.import_module(f"hoplab.kinds.{_name}")
