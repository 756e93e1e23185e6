"""Which files a fleet bundle may hold, and where they land on a bench.

A bench runs a job from the bundle's copy of the experiment's directory, so a file the
experiment names is either inside that directory (and bundled), or refused at submit:
named any other way, the bench would open its own file of that name (its /tmp/p, its
/etc/shadow as a trace), never the submitter's.

- The lab file and every trace: inside the experiment's directory, links resolved.
- A setup or teardown argument, taken as a path relative to the command's directory
  (the experiment's, or the lab file's for a lab node's own commands): one that
  leaves it (`..`, a symbolic link out) is refused; one naming a regular file in it is
  bundled; one naming a FIFO, socket or device there is refused; anything else is a word
  (`-c`, `10.0.0.0/8`, a program looked up on the node's PATH).
- An absolute argument, on a node of the bench (a namespace): only under the system's
  own directories (SYSTEM: programs, /proc, /sys, /dev); on a device reached over SSH it
  names the device's file and is the device's business.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from hoplab import user_files
from hoplab.errors import SpecError, UsageError

SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/proc/", "/sys/", "/dev/")


def _outside(path: object, here: Path, source: str, key: str) -> SpecError:
    return SpecError(f"{path} is outside the experiment's directory {here}: a bench has "
                     "only the files in it (copy the file there and name it relative to "
                     "the experiment file)", file=source, key=key)


def inside(here: Path, path: Path, source: str, key: str) -> None:
    """SpecError naming `key` unless `path` resolves to a place inside `here`."""
    if not path.resolve().is_relative_to(here):
        raise _outside(path, here, source, key)


def _absolute(here: Path, arg: str, local: bool, source: str, key: str) -> None:
    if Path(arg).resolve().is_relative_to(here):
        raise SpecError(f"{arg}: name a file of the experiment's directory relative to "
                        "it (a bench unpacks it elsewhere)", file=source, key=key)
    if local and not arg.startswith(SYSTEM):
        raise SpecError(f"{arg}: an absolute path names the bench's own file, not yours: "
                        "copy it into the experiment's directory and name it relative "
                        f"(absolute paths may name only {', '.join(SYSTEM)})",
                        file=source, key=key)


def argument_file(here: Path, cwd: Path, arg: str, local: bool, source: str, key: str
                  ) -> Path | None:
    """The file of the experiment's directory `here` a setup argument names, to bundle;
    None for an argument that names none; SpecError naming `key` for one the rule
    refuses. `cwd`: the command's directory; `local`: it runs on a node of the bench."""
    if not arg or "\0" in arg:
        return None
    if Path(arg).is_absolute():
        _absolute(here, arg, local, source, key)
        return None
    if not Path(os.path.normpath(cwd / arg)).is_relative_to(here):
        raise _outside(arg, here, source, key)
    try:
        resolved = (cwd / arg).resolve()
        exists = resolved.exists()
    except (OSError, ValueError):  # too long a name, say: a word, not a file
        return None
    if not resolved.is_relative_to(here):
        raise _outside(f"{arg} (a link to {resolved})", here, source, key)
    if not exists or resolved.is_dir():
        return None
    try:
        user_files.check_regular(resolved.stat().st_mode)
    except user_files.FileRefused as e:
        raise SpecError(f"{arg}: {e}", file=source, key=key) from None
    return resolved


def job_path(root: Path, rel: str, what: str) -> Path:
    """Where manifest entry `rel` goes under `root`: a UsageError for one that is empty,
    absolute or climbs out with `..` (a store edited by hand, or by someone hostile)."""
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or ".." in parts or "\0" in rel:
        raise UsageError(f"{what}: file {rel!r} would land outside the job's directory: "
                         "refused")
    return root.joinpath(*parts)
