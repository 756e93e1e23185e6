"""What submit stores and queues, and who takes it: the experiment's files by content,
its jobs in the seeded order on its route's queue; a device's lock held by one run at a
time across benches; bad input refused before anything is stored."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.fleet.queue.devices import device_keys
from hoplab.fleet.queue.routes import matches, queue_of
from hoplab.fleet.queue.submit import enqueue, pack
from hoplab.run.experiment import schedule
from hoplab.spec import load_lab
from hoplab.spec.experiment_loader import load_experiment
from tests.fleet.benches import query
from tests.helpers.lab import hoplab


def test_pack_stores_what_the_experiment_names_and_enqueue_keeps_its_order(
        db: str, experiment: Path, tmp_path: Path) -> None:
    (tmp_path / "shape.sh").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "unused.sh").write_text("#!/bin/sh\nexit 1\n")
    experiment.write_text(experiment.read_text().replace(
        '[matrix]\ninterval = ["0.1s", "0.2s"]',
        '[matrix.shaped.off]\n[matrix.shaped.on]\n"setup.a" = [["sh", "shape.sh"]]'))
    bundle = pack(db, experiment)
    assert pack(db, experiment) == bundle  # the same files: the same bundle
    ((files,),) = query(db, "SELECT files FROM hoplab_fleet_bundles WHERE id = %s", bundle)
    assert sorted(files) == ["exp.toml", "lab.toml", "shape.sh"]
    (stored,) = query(db, "SELECT content FROM hoplab_fleet_files WHERE sha256 = %s",
                      files["shape.sh"])
    assert bytes(stored[0]) == (tmp_path / "shape.sh").read_bytes()

    experiment_id = enqueue(db, bundle, where={"device": "erx"}, labels={"schedule": "n"})
    rows = query(db, "SELECT queue_name, args FROM procrastinate_jobs WHERE "
                     "args->>'experiment_id' = %s ORDER BY id", experiment_id)
    ((seed,),) = query(db, "SELECT seed FROM hoplab_fleet_experiments WHERE id = %s",
                       experiment_id)
    exp = dataclasses.replace(load_experiment(experiment), seed=seed)
    assert {a["seed"] for _, a in rows} == {seed}
    assert [(a["variant"], a["test"], a["repetition"]) for _, a in rows] == \
        [(j.variant, j.test, j.repetition) for j in schedule(exp)]
    assert [a["order"] for _, a in rows] == list(range(6))
    assert {q for q, _ in rows} == {queue_of((), {"device": "erx"})}
    ((labels,),) = query(db, "SELECT labels FROM hoplab_fleet_experiments WHERE id = %s",
                         experiment_id)
    assert labels == {"schedule": "n"}


def test_routes() -> None:
    assert queue_of(("b1", "b2"), {}) == queue_of(("b2", "b1", "b1"), {})
    assert queue_of((), {"device": "erx"}) != queue_of((), {"device": "ax"})
    assert matches("b1", {"device": "erx", "site": "2"}, (), {"device": "erx"})
    assert not matches("b1", {"device": "ax"}, (), {"device": "erx"})
    assert not matches("b3", {"device": "erx"}, ("b1", "b2"), {"device": "erx"})
    assert matches("b2", {}, ("b1", "b2"), {})


def test_device_keys_are_the_devices_addresses_sorted_once(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "d"\n[nodes.r2]\nssh = "root@10.0.0.9"\n'
                   '[nodes.r1]\nssh = "root@10.0.0.2"\nssh_options = { port = 2222 }\n'
                   '[nodes.r3]\nssh = "admin@10.0.0.2"\nssh_options = { port = 2222 }\n')
    assert device_keys(load_lab(str(lab))) == ["ssh:10.0.0.2:2222", "ssh:10.0.0.9:22"]


HOLDER = """
import json, sys, time
from hoplab.fleet.queue.devices import holding
db, keys = sys.argv[1], json.loads(sys.argv[2])
spans = []
for _ in range(3):
    with holding(db, keys):
        t0 = time.time()
        time.sleep(0.15)  # the run: what the lock is held for
        spans.append((t0, time.time()))
print(json.dumps(spans))
"""


def test_a_device_serves_one_run_at_a_time_across_benches(db: str) -> None:
    """Two benches' runs wanting the same two devices, listed in opposite orders: never
    both at once (their stored start and end times never overlap), and no deadlock."""
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, db, json.dumps(keys)],
                              stdout=subprocess.PIPE, text=True)
             for keys in (["10.0.0.1:22", "10.0.0.2:22"], ["10.0.0.2:22", "10.0.0.1:22"])]
    spans = sorted(s for p in procs for s in json.loads(p.communicate(timeout=60)[0]))
    assert all(p.returncode == 0 for p in procs)
    assert len(spans) == 6
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start


def test_bad_input_is_refused_before_anything_is_stored(db: str, experiment: Path) -> None:
    experiment.write_text(experiment.read_text().replace('"1s"', '"1 fortnight"'))
    got = hoplab("submit", str(experiment), "--db", db)
    assert got.returncode == 2
    assert f"{experiment}:12: tests[0].duration:" in got.stderr, got.stderr
    assert query(db, "SELECT id FROM hoplab_fleet_bundles") == []
    got = hoplab("submit", str(experiment), "--db", db, "--where", "device")
    assert got.returncode == 2 and "--where 'device': no '='" in got.stderr, got.stderr


def test_a_stored_manifest_entry_outside_the_job_is_refused_and_modes_kept(
        db: str, experiment: Path, tmp_path: Path) -> None:
    """Issue 29, part 1, through the store: a manifest edited to climb out of the job's
    directory is refused before anything is written; each file keeps its mode."""
    from hoplab.errors import UsageError
    from hoplab.fleet.queue.bundle import rows_of, unpack
    from hoplab.fleet.queue.db import connect
    from hoplab.fleet.queue.schema import QUEUE

    (tmp_path / "lab.toml").chmod(0o600)
    bundle = pack(db, experiment)
    jobs = tmp_path / "jobs"
    with connect(db, tables=[QUEUE]) as conn:
        unpack(rows_of(conn), bundle, jobs)
    assert {p.name: p.stat().st_mode & 0o777 for p in (jobs / bundle).iterdir()
            if p.suffix == ".toml"} == {"exp.toml": 0o644, "lab.toml": 0o600}
    escaped = tmp_path / "x"
    query(db, "UPDATE hoplab_fleet_bundles SET files = files - 'lab.toml' || "
              "jsonb_build_object(%s::text, files->'lab.toml') RETURNING id",
          f"../../../../../../../../..{escaped}")
    with connect(db) as conn, pytest.raises(UsageError, match="outside the job's directory"):
        unpack(rows_of(conn), bundle, tmp_path / "again")
    assert not escaped.exists() and not (tmp_path / "again").exists()
    with pytest.raises(UsageError, match="outside the job's directory"):
        enqueue(db, bundle)


def test_a_bench_file_is_lab_overrides(tmp_path: Path) -> None:
    from hoplab.errors import SpecError
    from hoplab.fleet.queue.benchfile import read

    path = tmp_path / "bench.toml"
    path.write_text('[lab.nodes.router]\nssh = "root@192.168.1.1"\n'
                    'ssh_options = { port = 2222 }\n[lab.links.0.attach]\nclient = "enp3s0"\n')
    assert read(path) == ['lab.nodes.router.ssh="root@192.168.1.1"',
                          "lab.nodes.router.ssh_options.port=2222",
                          'lab.links.0.attach.client="enp3s0"']
    path.write_text('[nodes.router]\nssh = "root@192.168.1.1"\n')
    with pytest.raises(SpecError, match=f"{path}: nodes: unknown key"):
        read(path)
