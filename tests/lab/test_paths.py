"""The path hoplab says a flow takes is the one the kernels of the lab's nodes take, and
samplers watch the routers on it: in a star, spoke-to-spoke traffic is seen at the hub."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from hoplab.store import open_store
from tests.helpers.lab import EXAMPLES, LabUp, hoplab, lab_namespaces, new_lab_name

pytestmark = [pytest.mark.root]


def without_impairments(example: str) -> str:
    """The example's topology and addressing; impairments do not change routes and
    without them no link needs the userspace wire."""
    data = tomllib.loads((EXAMPLES / f"{example}.toml").read_text())
    data.pop("link_defaults", None)
    lines = [f'name = "{data["name"]}"']
    gen = data.get("generate", {})
    for key, value in gen.items():
        lines += ["[generate]", f"{key} = {json.dumps(value)}" if not isinstance(value, dict)
                  else f"{key} = {{ " + ", ".join(f"{k} = {json.dumps(v)}"
                                                  for k, v in value.items()) + " }"]
    for link in data.get("links", []):
        lines += ["[[links]]", f"between = {json.dumps(link['between'])}"]
    return "\n".join(lines) + "\n"


def kernel_next(ns: str, addr: str) -> tuple[str | None, str]:
    """(gateway or None, device) the kernel of namespace ns picks for addr."""
    out = subprocess.run(["ip", "-n", ns, "-j", "route", "get", addr], capture_output=True,
                         text=True, check=True).stdout
    (route,) = json.loads(out)
    return route.get("gateway"), route["dev"]


@pytest.mark.parametrize("example", ["star", "grid", "mesh"])
def test_plan_path_is_what_the_kernels_do(lab_up: LabUp, example: str) -> None:
    up = lab_up(without_impairments(example))
    plan = up.plan
    owner = {str(a.ip): n.name for n in plan.nodes for i in n.ifaces for a in i.addrs}
    peer = {(n.name, i.name): i.peer for n in plan.nodes for i in n.ifaces}
    for dst in plan.nodes:
        addr = str(dst.primary4)
        for src in plan.nodes:
            if src is dst:
                continue
            walked = [src.name]
            while walked[-1] != dst.name and len(walked) <= len(plan.nodes):
                gw, dev = kernel_next(up.ns(walked[-1]), addr)
                walked.append(owner[gw] if gw is not None else peer[(walked[-1], dev)])
            assert plan.path(src.name, dst.name) == walked, (src.name, dst.name)


def test_spoke_to_spoke_traffic_is_sampled_at_the_hub(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(without_impairments("star"))
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\nseed = 1\n[[tests]]\nname = "p"\nkind = "ping"\n'
                   'from = "h1"\nto = "h2"\nduration = "1s"\ninterval = "0.1s"\n'
                   'samplers = { kinds = ["ifaces"], interval = "100ms" }\n')
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(db), "--json", "--lab-name", name, timeout=120)
    assert lab_namespaces(name) == set()
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    with open_store(str(db)) as store:
        rec = store.get_run(run["id"])
    sampled = {s.node for s in rec.series if s.name.startswith("iface.")}
    assert sampled == {"hub"}
