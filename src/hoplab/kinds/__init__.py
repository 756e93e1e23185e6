"""Test kinds: one module per kind, each registering a Kind (see registry.py and
docs/kinds.md). Importing this package is light: the built-in kinds are loaded
the first time the registry is asked."""

from __future__ import annotations

from hoplab.kinds.registry import (
    HEADLINES,
    FlowTool,
    Kind,
    find,
    flow_names,
    flow_tool,
    get,
    names,
    per_flow,
    register,
    unregister,
)

__all__ = ["HEADLINES", "FlowTool", "Kind", "find", "flow_names", "flow_tool", "get", "names",
           "per_flow", "register", "unregister"]
