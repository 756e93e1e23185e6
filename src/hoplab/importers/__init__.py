"""Measurements made elsewhere, as runs: iperf3 -J outputs, Flent data files, hoplab exports.

    runs = load_files([Path("old.json"), Path("rrul.flent.gz")], Options(experiment="2023"))
    for run in runs:
        store.save_run(run)

Every file is read, parsed and checked before the caller saves anything, so
one bad file among several leaves the store as it was (see `load_files`).
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import zlib
from pathlib import Path

from hoplab import export
from hoplab.errors import HoplabError, UsageError
from hoplab.importers import flent, iperf3
from hoplab.importers.options import Options
from hoplab.record import RunRecord
from hoplab.store import check_run

__all__ = ["Options", "load_file", "load_files"]

# The first bytes of the compressed containers Flent writes (.flent.gz, .bz2, .xz).
_GZIP, _BZ2, _XZ = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"


def _decompress(path: Path, data: bytes) -> bytes:
    try:
        if data.startswith(_GZIP):
            return gzip.decompress(data)
        if data.startswith(_BZ2):
            return bz2.decompress(data)
        if data.startswith(_XZ):
            return lzma.decompress(data)
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
        raise UsageError(f"{path}: corrupted or truncated compressed file ({exc})") from None
    return data


def load_file(path: Path, options: Options) -> RunRecord:
    """One file as a run; UsageError naming the file if it cannot be read or understood."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    plain = _decompress(path, data)
    text = plain.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON, or cut short (line {exc.lineno}, column "
                         f"{exc.colno}: {exc.msg})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: JSON but not an object: not an iperf3 or Flent file")
    try:
        if "x_values" in doc and "results" in doc:
            run = flent.to_run(doc, data, path, options)
        elif "start" in doc:
            run = iperf3.to_run(text, plain, path, options)
        elif doc.get("format") == export.FORMAT:
            run = export.from_json(doc)
            run.experiment = options.experiment or run.experiment
            run.test = options.test or run.test
            run.labels = run.labels | options.labels
        else:
            raise UsageError("neither an iperf3 -J output (no 'start') nor a Flent data file "
                             "(no 'x_values' and 'results') nor a hoplab export")
    except UsageError as exc:
        msg = str(exc)
        raise UsageError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
    except HoplabError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise UsageError(f"{path}: unexpected layout ({type(exc).__name__}: {exc})") from None

    # What the store would refuse (two metrics of one key, metadata that is not JSON) is
    # refused here, naming the file, before anything of any file is saved.
    try:
        check_run(run)
    except UsageError as exc:
        raise UsageError(f"{path}: cannot be stored: {exc}") from None
    return run


def load_files(paths: list[Path], options: Options) -> list[RunRecord]:
    """Every file as a run, in order, or UsageError for the first bad one.

    Nothing is saved here: the caller saves only once every file has loaded, which
    is how one truncated file among ten leaves no half-import behind.
    """
    return [load_file(p, options) for p in paths]
