"""The directory of a server with files of its own (nginx: its config and its page), on
the node that runs it.

On a namespace node it is a directory of the run's work directory on this machine. On a
device reached over SSH it is a directory in the device's /tmp named after the run's
work directory (`/tmp/hoplab-run-...-server-N`), filled with one `tar -x` over the
executor (BusyBox has it; no SFTP needed) and removed with `rm -rf` once the server has
stopped.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hoplab.errors import HoplabError
from hoplab.kinds.flow import Files
from hoplab.nodes.executor import Executor


@dataclass(frozen=True)
class Home:
    path: PurePosixPath
    executor: Executor | None       # None: on this machine


def write_local(home: Path, files: Files) -> None:
    for rel, data in files.items():
        path = home / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def tar_text(files: Files) -> str:
    """A ustar archive of `files` as text: the executor sends its input as UTF-8, which
    leaves ASCII as it is (the server's files are ASCII: SVG, HTML, config)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel.rstrip("/"))
            if rel.endswith("/"):
                info.type, info.mode = tarfile.DIRTYPE, 0o700
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o600
                tar.addfile(info, io.BytesIO(data))
    try:
        return buf.getvalue().decode("ascii")
    except UnicodeDecodeError:
        raise HoplabError("a server's files must be ASCII to be sent to a device") from None


def place(ex: Executor, home: PurePosixPath, files: Files) -> None:
    """Make `home` on the device and unpack `files` into it."""
    done = ex.run(["sh", "-c", 'mkdir -p "$1" && tar -xf - -C "$1"', "sh", str(home)],
                  input=tar_text(files), timeout=60)
    if done.returncode != 0:
        raise HoplabError(f"{ex.node}: cannot write the server's files into {home}: "
                          f"{(done.stderr or done.stdout).strip()}")


def remove(home: Home) -> None:
    """Remove a home on a device; a node that no longer answers keeps it (/tmp)."""
    if home.executor is not None:
        # Cleanup must not hide the run's own outcome.
        with contextlib.suppress(Exception):
            home.executor.run(["rm", "-rf", str(home.path)], timeout=30)
