"""Where hoplab keeps what it fetches or builds once for VMs (kernels, initramfs
images, keys): HOPLAB_CACHE_DIR, else /var/cache/hoplab. Each entry is made under an
exclusive lock (an flock, which dies with its holder: a SIGKILL leaves no lock), into a
temporary directory renamed into place, so a half-made entry is never taken for one."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_CACHE_DIR = "/var/cache/hoplab"


def cache_dir() -> Path:
    return Path(os.environ.get("HOPLAB_CACHE_DIR") or DEFAULT_CACHE_DIR)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def entry(path: Path, make: Callable[[Path], None]) -> Path:
    """`path`, made by make(tmpdir) the first time (tmpdir is renamed to `path`)."""
    if path.exists():
        return path
    with locked(path):
        if path.exists():
            return path    # another process made it while this one waited
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            make(tmp)
            tmp.rename(path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return path
