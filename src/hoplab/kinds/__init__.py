"""Test kinds: one module per kind, each registering a Kind in hoplab.kind_registry
(docs/kinds.md). Importing this package is light: it gives the registry the loader of
the built-in kinds (builtin.py), which runs the first time the registry is asked. The
layers below kinds ask hoplab.kind_registry; whatever reads, runs or shows tests imports
this package first (the command line, the dashboard and the orchestrator do)."""

from __future__ import annotations

from hoplab import kind_registry
from hoplab.kind_registry import (
    HEADLINES,
    FlowTool,
    Kind,
    Option,
    find,
    flow_names,
    flow_tool,
    get,
    metrics_of,
    names,
    per_flow,
    register,
    unregister,
)

__all__ = ["HEADLINES", "FlowTool", "Kind", "Option", "find", "flow_names", "flow_tool", "get",
           "metrics_of", "names", "per_flow", "register", "unregister"]


def _load_builtin() -> None:
    from hoplab.kinds import builtin  # noqa: F401  (registers them)


kind_registry.load_builtin_with(_load_builtin)
