"""The helper that gives wireguard-go a private ``/var/run/wireguard``.

It runs as ``python -I -S -c PRIVATE_RUN_HELPER RUNDIR PROGRAM ARGS...`` in the
place of the would-be wireguard-go, already inside the node's network
namespace, and execs PROGRAM (keeping the PID) in a mount namespace of its own
where a small tmpfs covers /var/run (so nothing is created on the host) and
RUNDIR is bound at /var/run/wireguard. See :mod:`hoplab.lab.wireguard.userspace`
for why.
"""

from __future__ import annotations

# Inline source with only os/ctypes/sys, under -S, because importing this
# package (importlib.metadata etc.) would cost ~50 ms of CPU per daemon instead
# of ~10 ms; numbers are <sched.h>/<sys/mount.h>.
PRIVATE_RUN_HELPER = """\
import ctypes, os, sys
rundir, argv = sys.argv[1], sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                       ctypes.c_ulong, ctypes.c_char_p)
def check(rc, what):
    if rc != 0:
        raise OSError(ctypes.get_errno(), what)
try:
    check(libc.unshare(0x20000), "unshare(CLONE_NEWNS)")
    # MS_REC|MS_PRIVATE: none of the mounts below propagate back to the host.
    check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "make / private")
    # Opened after unshare (a bind source must be a mount of this namespace)
    # and before /var/run is covered (RUNDIR usually lives under /run).
    dir_fd = os.open(rundir, os.O_PATH | os.O_DIRECTORY)
    var_run = os.path.realpath("/var/run").encode()
    # MS_NOSUID|MS_NODEV|MS_NOEXEC
    check(libc.mount(b"tmpfs", var_run, b"tmpfs", 0x2 | 0x4 | 0x8, b"size=64k,mode=0755"),
          "tmpfs on /var/run")
    os.mkdir(var_run + b"/wireguard", 0o700)
    # MS_BIND
    check(libc.mount(b"/proc/self/fd/%d" % dir_fd, var_run + b"/wireguard", None, 0x1000, None),
          "bind " + rundir + " on /var/run/wireguard")
    os.close(dir_fd)
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.exit("hoplab wireguard helper: %s" % exc)
"""
