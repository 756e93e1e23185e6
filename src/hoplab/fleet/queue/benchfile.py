"""A bench's own facts, from a file on that machine (`hoplab worker --bench-file F`):
what the names of a submitted lab file are here, its NICs and its devices' addresses.

    # /etc/hoplab/bench.toml
    [lab.nodes.router]              # the lab file's device node "router", on this bench
    ssh = "root@192.168.1.1"
    ssh_options = { identity = "/root/.ssh/lab" }
    [lab.links.0.attach]            # the host NIC cabled to it, here
    client = "enp3s0"

Every value is a `lab.PATH` override, as `hoplab run --set lab.PATH=VALUE` takes it,
applied to each submitted experiment this bench runs.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from hoplab.errors import SpecError


def _leaves(table: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict):
            out += _leaves(value, path)
        else:
            out.append((path, value))
    return out


def read(path: Path) -> list[str]:
    """The file's overrides as --set items (KEY=VALUE, the value a TOML value)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError(f"cannot read the bench file: {e.strerror}", file=str(path)) from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"TOML syntax error: {e}", file=str(path)) from None
    for key in data:
        if key != "lab":
            raise SpecError("unknown key; a bench file has one table, lab (the lab files' "
                            "nodes and links on this bench)", file=str(path), key=key)
    if not isinstance(data.get("lab", {}), dict):
        raise SpecError("must be a table", file=str(path), key="lab")
    # JSON writes strings, numbers, booleans and lists as TOML reads them back.
    return [f"{key}={json.dumps(value)}" for key, value in _leaves(data.get("lab", {}), "lab")]
