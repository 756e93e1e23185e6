"""An experiment and every file it names, stored content-addressed in the store, so a
bench on another machine needs only hoplab and the store.

A bundle is a manifest {relative path: SHA-256} under the experiment's directory (no
file outside it is bundled: hoplab.fleet.queue.bundle_paths), each file's mode, and the path
of the experiment file in it; its id is the SHA-256 of these, so the same files
submitted twice are one bundle, stored once. Each file, and all of them together, are
bounded by hoplab.user_files.limit().
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

from hoplab import user_files
from hoplab.errors import SpecError, UsageError
from hoplab.fleet.queue.bundle_paths import argument_file, inside, job_path
from hoplab.spec.experiment import Experiment, Variant

# Where a bundled file is named: the file saying so, and its key there.
Named = tuple[str, str]


def named_files(exp: Experiment) -> dict[Path, Named]:
    """The experiment file, its lab file, every link's trace file, and every file under
    the experiment's directory that a setup command names (the scripts it runs, what
    they read), all absolute, each with where it is named; a SpecError (exit 2, naming
    the key) for one the rule of hoplab.fleet.queue.bundle_paths refuses."""
    here = Path(exp.source).resolve().parent
    files = {Path(exp.source).resolve(): (exp.source, "the experiment file")}
    inside(here, Path(exp.lab_source), exp.source, "lab")
    files.setdefault(Path(exp.lab_source).resolve(), (exp.source, "lab"))
    for v in exp.variants:
        for link in v.lab.links:
            for trace in {d.trace for d in (link.forward, link.reverse)} - {None}:
                key = f"links[{link.index}].trace"
                inside(here, Path(str(trace)), exp.lab_source, key)
                files.setdefault(Path(str(trace)).resolve(), (exp.lab_source, key))
        for source, key, local, argv in _commands(exp, v):
            cwd = Path(source).resolve().parent
            for arg in argv:
                found = argument_file(here, cwd, arg, local, source, key)
                if found is not None:
                    files.setdefault(found, (source, key))
    _check_sizes(files)
    return dict(sorted(files.items()))


def _check_sizes(files: dict[Path, Named]) -> None:
    """Each file regular, and they and their sum within user_files.limit() (read again,
    bounded, when stored: one may change in between)."""
    total, bound = 0, user_files.limit()
    for f, (source, key) in files.items():
        try:
            info = f.stat()
            user_files.check_regular(info.st_mode)
        except OSError as e:
            raise SpecError(f"cannot read {f}: {e.strerror}", file=source, key=key) from None
        except user_files.FileRefused as e:
            raise SpecError(f"{f}: {e}", file=source, key=key) from None
        total += info.st_size
        if info.st_size > bound or total > bound:
            what = f"{f}" if info.st_size > bound else "the bundle, with " + str(f)
            raise SpecError(f"{what}: {user_files.too_large(max(info.st_size, total))}",
                            file=source, key=key)


def _commands(exp: Experiment, v: Variant
              ) -> list[tuple[str, str, bool, tuple[str, ...]]]:
    """Each command a variant runs: the file and key naming it (it runs in that file's
    directory), whether it runs on a node of the bench, its argv."""
    local = {n.name: n.node_kind.local for n in v.lab.nodes}
    out = [(exp.source, f"setup.{node}", local.get(node, True), argv)
           for node, argv in v.setup]
    out += [(exp.lab_source, f"nodes.{n.name}.{what}", local[n.name], argv)
            for n in v.lab.nodes
            for what, argvs in (("setup", n.setup), ("teardown", n.teardown))
            for argv in argvs]
    return out


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path, source: str, key: str) -> bytes:
    try:
        return user_files.read_bytes(path)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}", file=source, key=key) from None
    except user_files.FileRefused as e:
        raise SpecError(f"{path}: {e}", file=source, key=key) from None


def store(conn: psycopg.Connection[tuple[Any, ...]], exp: Experiment) -> str:
    """Store the experiment's files (those not stored yet) and its bundle; its id."""
    files = named_files(exp)
    root = Path(exp.source).resolve().parent
    manifest: dict[str, str] = {}
    modes: dict[str, int] = {}
    total, bound = 0, user_files.limit()
    with conn.transaction():
        for f, (source, key) in files.items():
            data = _read(f, source, key)
            total += len(data)
            if total > bound:
                raise SpecError(f"the bundle: {user_files.too_large(total)}",
                                file=source, key=key)
            sha = _digest(data)
            rel = str(f.relative_to(root))
            job_path(Path("/job"), rel, "this experiment")  # the bench's rule, checked now
            manifest[rel] = sha
            modes[rel] = f.stat().st_mode & 0o777
            conn.execute("INSERT INTO hoplab_fleet_files (sha256, size, content) "
                         "VALUES (%s, %s, %s) ON CONFLICT (sha256) DO NOTHING",
                         (sha, len(data), data))
        experiment = str(Path(exp.source).resolve().relative_to(root))
        canonical = json.dumps({"experiment": experiment, "files": manifest, "modes": modes},
                               sort_keys=True)
        bundle_id = _digest(canonical.encode())[:24]
        conn.execute("INSERT INTO hoplab_fleet_bundles (id, experiment, files, modes) "
                     "VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                     (bundle_id, experiment, json.dumps(manifest), json.dumps(modes)))
    return bundle_id


# A query with %(name)s parameters -> its rows as dicts: a psycopg connection's (rows_of)
# or a bench's, through the connection it already holds.
Query = Callable[..., list[dict[str, Any]]]


def rows_of(conn: psycopg.Connection[Any]) -> Query:
    def query(sql: str, **args: Any) -> list[dict[str, Any]]:
        with conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(sql, args).fetchall()
    return query


def _write(target: Path, content: bytes, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a link left where a file goes is refused, never written through.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        os.write(fd, content)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def unpack(query: Query, bundle_id: str, dest: Path) -> Path:
    """Write bundle `bundle_id`'s files under `dest` (once: a second call finds them),
    each with its own mode; the path of its experiment file there. A manifest entry that
    would land outside dest/bundle_id is a UsageError, before anything is written."""
    rows = query("SELECT experiment, files, modes FROM hoplab_fleet_bundles "
                 "WHERE id = %(id)s", id=bundle_id)
    if not rows:
        raise UsageError(f"no bundle {bundle_id} in the store")
    experiment, manifest = str(rows[0]["experiment"]), dict(rows[0]["files"])
    # A bundle stored before modes were kept: every file as it was then, executable.
    modes = dict(rows[0]["modes"] or {}) or dict.fromkeys(manifest, 0o755)
    root = dest / bundle_id
    what = f"bundle {bundle_id}"
    targets = {rel: job_path(root, rel, what) for rel in manifest}
    start = job_path(root, experiment, what)
    done = root / ".complete"
    if not done.exists():
        for rel, sha in manifest.items():
            got = query("SELECT content FROM hoplab_fleet_files WHERE sha256 = %(sha)s",
                        sha=sha)
            content = bytes(got[0]["content"]) if got else b""
            if not got or _digest(content) != sha:
                raise UsageError(f"bundle {bundle_id}: file {rel} is missing or damaged")
            _write(targets[rel], content, int(modes.get(rel, 0o644)) & 0o777)
        done.touch()
    return start
