"""pyroute2 imported by several threads at once (samplers of several nodes start so):
every thread gets whole modules. The script below with `pass` for netlink_lib.load()
failed 20 runs in 20 here, with an import deadlock or a partially initialised module;
that is pyroute2's and Python's behaviour, so it is not asserted here."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import threading
from hoplab.tools import netlink_lib
errors = []
def ipr():
    try:
        netlink_lib.load()
        from pyroute2 import IPRoute  # noqa: F401
    except Exception as e:
        errors.append(repr(e))
def diag():
    try:
        netlink_lib.load()
        from pyroute2.netlink.diag import MarshalDiag  # noqa: F401
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=f) for f in (ipr, diag) * 4]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors or "ok")
"""


def test_threads_importing_pyroute2_at_once_all_get_whole_modules() -> None:
    for _ in range(5):  # each a fresh interpreter: the first import is the racy one
        proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True,
                              text=True, timeout=60, check=True)
        assert proc.stdout.strip() == "ok", proc.stdout

