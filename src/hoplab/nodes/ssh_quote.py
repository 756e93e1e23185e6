"""The one place an argv becomes a remote command line, and where a remote process
tells its PID and start time.

An SSH server hands the command to the user's login shell (`sh -c`, BusyBox ash on
OpenWrt). Every argv element is quoted once here with shlex.quote (POSIX single
quotes, which ash, dash and bash read alike), so no value from a lab file is ever
parsed by a shell. The command first prints its own /proc/PID/stat line (a shell
builtin `read`, no fork), then execs the argv in the same process: the PID and the
start ticks hoplab records are those of the tool itself.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

# `read` and `echo` are builtins in every POSIX shell: no fork before the tool starts.
_PREAMBLE = ('read -r s </proc/$$/stat; echo "$s"; '
             'command -v -- "$1" >/dev/null || { echo "$1: command not found" >&2; exit 127; }; '
             'exec "$@"')
# The same, but the tool is exec'd only once this side says "go" on stdin, after it has
# written the PID down: if hoplab dies first (SIGKILL), the channel closes, `read` sees
# the end of input and the shell exits without ever running the tool.
_GATED = ('read -r s </proc/$$/stat; echo "$s"; '
          'read -r go && [ "$go" = go ] || exit 0; '
          'command -v -- "$1" >/dev/null || { echo "$1: command not found" >&2; exit 127; }; '
          'exec "$@"')
# Runs argv in a directory: `cd` first, then the same exec.
_CWD = 'cd -- "$1" || exit 1; shift; exec "$@"'
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None,
                   cwd: str | None = None, *, gated: bool = False) -> str:
    """The command line for an SSH exec request running argv (with env added, in
    directory cwd). A missing command is exit 127, "NAME: command not found". `gated`:
    the tool starts only after a line "go" arrives on stdin (see _GATED)."""
    if not argv:
        raise ValueError("empty argv")
    for a in argv:
        if not isinstance(a, str) or "\0" in a:
            raise ValueError(f"argv elements must be strings without NUL: {a!r}")
    full = list(argv)
    if env:
        for k, v in env.items():
            if not _ENV_NAME.fullmatch(k) or "\0" in v:
                raise ValueError(f"invalid environment variable {k!r}")
        full = ["env", *(f"{k}={v}" for k, v in env.items()), *full]
    if cwd is not None:
        full = ["sh", "-c", _CWD, "sh", cwd, *full]
    return ("exec sh -c " + shlex.quote(_GATED if gated else _PREAMBLE) + " sh "
            + shlex.join(full))


def parse_stat(line: str) -> tuple[int, int]:
    """(pid, start ticks) from a /proc/PID/stat line. The command name (field 2) may
    hold spaces and parentheses, so fields are counted after its last ')'."""
    head, sep, rest = line.rpartition(")")
    if not sep:
        raise ValueError(f"not a /proc/PID/stat line: {line[:80]!r}")
    pid = int(head.split("(", 1)[0])
    fields = rest.split()
    # rest starts at field 3 (state); start time is field 22.
    return pid, int(fields[19])


# Sends `sig` (a number; 0 only checks) to each "PID TICKS" argument pair whose process
# still has those start ticks (a PID since reused by another process is left alone) and
# prints the pairs that were alive. A function's positional parameters are its own, so
# the stat fields never mix with the arguments.
SIGNAL_CHECKED = r'''f() { st=${20}; }
sig=$1; shift
while [ $# -ge 2 ]; do
  pid=$1; t=$2; shift 2
  { read -r s </proc/"$pid"/stat; } 2>/dev/null || continue
  set -f; f ${s##*) }; set +f
  [ "$st" = "$t" ] || continue
  [ "$sig" = 0 ] || kill -"$sig" "$pid" 2>/dev/null
  echo "$pid $t"
done'''


# `w TOOL` prints the tool's path and succeeds when an executable file of that name is
# in $PATH. Not `command -v`: it also names builtins, and BusyBox built with a
# "standalone shell" reports every applet by its bare name, even one with no link
# installed (Debian's does; OpenWrt's does not).
SH_WHICH = r'''w() { _o=$IFS; IFS=:; for _d in $PATH; do
  [ -n "$_d" ] && [ -x "$_d/$1" ] && [ ! -d "$_d/$1" ] && { IFS=$_o; echo "$_d/$1"; return 0; }
done; IFS=$_o; return 1; }
'''
