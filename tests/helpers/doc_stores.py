"""Stores for the commands the README and the examples' comments print
(tests/unit/test_doc_commands.py): real runs (tests/data/report_runs, render_runs,
web_runs), each copy given the experiment, test, variant and labels that the
experiment named would have stored, so that a command typed as written finds what it
would find after running that experiment."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from hoplab.export import from_json
from hoplab.record import RunRecord
from hoplab.store import Store, open_store
from tests.helpers.runs import REPORT_RUNS, real_run

WEB_RUNS = Path(__file__).resolve().parents[1] / "data" / "web_runs"
# A real RFC 2544 run: 64, 512 and 1518-byte frames through 50 Mbit/s (1 s trials).
THROUGHPUT_RUN = Path(__file__).resolve().parents[1] / "data" / "throughput_runs" / \
    "ndr-50mbit.json.gz"


def _profiled() -> list[RunRecord]:
    """The four profiled runs of examples/wireguard-profile.toml (tcp, perf on r1 and
    r2): without WireGuard, with, with, without."""
    out = []
    for doc in json.loads(gzip.decompress(REPORT_RUNS.read_bytes())):
        run = from_json(doc)
        run.id = None
        out.append(run)
    return out


def _web(name: str) -> RunRecord:
    run = from_json(json.loads((WEB_RUNS / f"{name}.json").read_text()))
    run.id = None
    return run


def _save(store: Store, run: RunRecord, experiment: str, test: str, rep: int,
          variant: dict[str, Any], labels: dict[str, str]) -> int:
    run.experiment, run.test, run.repetition = experiment, test, rep
    run.variant, run.labels = dict(variant), dict(labels)
    run.started_at += 10.0 * store.count_runs()
    return store.save_run(run)


def _plain_and_wg(store: Store, experiment: str, reps: int) -> list[int]:
    """The wireguard-profile runs, in the order a run of the experiment stores them:
    each repetition without WireGuard, then with."""
    plain = [r for r in _profiled() if not r.variant["wireguard"]]
    wg = [r for r in _profiled() if r.variant["wireguard"]]
    ids = []
    for rep in range(reps):
        for run in (plain[rep % 2], wg[rep % 2]):
            ids.append(_save(store, run, experiment, "bulk", rep + 1, run.variant,
                             {"device": "veth"}))
    return ids


def _versions(store: Store, versions: list[str], reps: int,
              commits: dict[str, str] | None = None) -> list[int]:
    """examples/nat-versions/versions.toml: the profiled bulk runs as one run per
    version and repetition, labelled version (and commit, where `commits` names one)."""
    ids = []
    for i, version in enumerate(versions):
        for rep in range(reps):
            run = _profiled()[(i + rep) % 4]
            labels = {"device": "veth", "version": version}
            if commits:
                labels["commit"] = commits[version]
            ids.append(_save(store, run, "versions", "nat-bulk", rep + 1, {}, labels))
    return ids


def _hop_sweep(store: Store) -> list[int]:
    return [_save(store, real_run("tcp"), "hop-sweep", "tcp-up", 1, {"hops": hops}, {})
            for hops in (1, 2, 4)]


def _qos(store: Store) -> list[int]:
    """examples/qos-under-load.toml's page loads, qos off and on, two repetitions."""
    return [_save(store, _web(name), "qos-under-load", "page", int(name[-1]),
                  {"qos": qos}, {})
            for name, qos in (("d25_rep1", "off"), ("d25_rep2", "off"),
                              ("d20_rep1", "on"), ("d20_rep2", "on"))]


def readme_store(path: Path, commits: dict[str, str]) -> dict[str, list[int]]:
    """The store the README's commands read, its run ids by what they are:
    1-8 wireguard-profile (run 1 without WireGuard, 2 with; all profiled, r1 and r2),
    9-16 versions v1-v4 (labels version and commit: `commits`), 17-19 hop-sweep
    tcp-up (hops 1, 2, 4), 20-23 qos-under-load page loads, 24-25 rrul runs of two
    firmwares."""
    with open_store(str(path)) as store:
        found = {"wireguard-profile": _plain_and_wg(store, "wireguard-profile", 4),
                 "versions": _versions(store, ["v1", "v2", "v3", "v4"], 2, commits),
                 "hop-sweep": _hop_sweep(store), "qos": _qos(store)}
        found["rrul"] = [_save(store, real_run("rrul"), "qos-under-load", "rrul", 1, {},
                               {"firmware": fw}) for fw in ("fw1", "fw2")]
    return found


def examples_store(path: Path) -> dict[str, list[int]]:
    """The store the examples' comments read: what running each of them stores."""
    with open_store(str(path)) as store:
        nat = []
        for version in ("v1", "v2"):
            for i, gro in enumerate(("on", "off")):
                for rep in range(4):
                    nat.append(_save(store, _profiled()[(i + rep) % 4], "nat-regression",
                                     "nat-bulk", rep + 1, {"gro": gro},
                                     {"device": "veth", "version": version}))
        found = {
            "nat-regression": nat,
            "wireguard-profile": _plain_and_wg(store, "wireguard-profile", 2),
            "versions": _versions(store, [f"v{i}" for i in range(1, 10)], 2),
            "exit-70ms": [_save(store, real_run("tcp"), "exit-70ms", "tcp-down", 1, {},
                                {})],
            "sfq-perturb": [_save(store, real_run("ping"), "sfq-perturb", "ping", 1,
                                  {"perturb": "p5"}, {})],
            "qos": _qos(store),
            "router-throughput": [_save(
                store, from_json(json.loads(gzip.decompress(THROUGHPUT_RUN.read_bytes()))),
                "router-throughput", "ndr", 1, {}, {})],
        }
    return found
