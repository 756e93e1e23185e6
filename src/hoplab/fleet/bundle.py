"""An experiment and every file it names, stored content-addressed in the store, so a
bench on another machine needs only hoplab and the store.

A bundle is a manifest {relative path: SHA-256} under the deepest directory holding all
its files, and the path of the experiment file in it; its id is the SHA-256 of that
manifest, so the same files submitted twice are one bundle, stored once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from hoplab.errors import UsageError
from hoplab.spec.experiment import Experiment


def named_files(exp: Experiment) -> list[Path]:
    """The experiment file, its lab file, every link's trace file, and every file under
    the experiment's directory that a variant's setup command names (the scripts it
    runs, what they read), all absolute."""
    here = Path(exp.source).resolve().parent
    files = {Path(exp.source).resolve(), Path(exp.lab_source).resolve()}
    for v in exp.variants:
        for link in v.lab.links:
            files |= {Path(d.trace).resolve() for d in (link.forward, link.reverse)
                      if d.trace is not None}
        for _node, argv in v.setup:
            for arg in argv:
                candidate = (here / arg).resolve()
                if candidate.is_file() and candidate.is_relative_to(here):
                    files.add(candidate)
    return sorted(files)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store(conn: psycopg.Connection[tuple[Any, ...]], exp: Experiment) -> str:
    """Store the experiment's files (those not stored yet) and its bundle; its id."""
    files = named_files(exp)
    root = Path(os.path.commonpath([f.parent for f in files]))
    manifest: dict[str, str] = {}
    with conn.transaction():
        for f in files:
            try:
                data = f.read_bytes()
            except OSError as e:
                raise UsageError(f"{f}: cannot read it: {e.strerror}") from None
            sha = _digest(data)
            manifest[str(f.relative_to(root))] = sha
            conn.execute("INSERT INTO hoplab_fleet_files (sha256, size, content) "
                         "VALUES (%s, %s, %s) ON CONFLICT (sha256) DO NOTHING",
                         (sha, len(data), data))
        experiment = str(Path(exp.source).resolve().relative_to(root))
        canonical = json.dumps({"experiment": experiment, "files": manifest}, sort_keys=True)
        bundle_id = _digest(canonical.encode())[:24]
        conn.execute("INSERT INTO hoplab_fleet_bundles (id, experiment, files) "
                     "VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING",
                     (bundle_id, experiment, json.dumps(manifest)))
    return bundle_id


# A query with %(name)s parameters -> its rows as dicts: a psycopg connection's (rows_of)
# or a bench's, through the connection it already holds.
Query = Callable[..., list[dict[str, Any]]]


def rows_of(conn: psycopg.Connection[Any]) -> Query:
    def query(sql: str, **args: Any) -> list[dict[str, Any]]:
        with conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(sql, args).fetchall()
    return query


def unpack(query: Query, bundle_id: str, dest: Path) -> Path:
    """Write bundle `bundle_id`'s files under `dest` (once: a second call finds them);
    the path of its experiment file there."""
    rows = query("SELECT experiment, files FROM hoplab_fleet_bundles WHERE id = %(id)s",
                 id=bundle_id)
    if not rows:
        raise UsageError(f"no bundle {bundle_id} in the store")
    experiment, manifest = str(rows[0]["experiment"]), dict(rows[0]["files"])
    root = dest / bundle_id
    done = root / ".complete"
    if not done.exists():
        for rel, sha in manifest.items():
            got = query("SELECT content FROM hoplab_fleet_files WHERE sha256 = %(sha)s",
                        sha=sha)
            content = bytes(got[0]["content"]) if got else b""
            if not got or _digest(content) != sha:
                raise UsageError(f"bundle {bundle_id}: file {rel} is missing or damaged")
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            # A setup script keeps running: its mode is not stored, so any file may run.
            target.chmod(0o755)
        done.touch()
    return root / experiment
