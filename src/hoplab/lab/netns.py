"""Configuring a lab's namespaces in bulk: one `ip -batch` and one `tc -batch` per
namespace and step, a few namespaces at a time from a pool of threads.

Each command runs through the namespace's executor (hoplab.nodes.netns_exec, the one
way hoplab runs a command in a namespace), which enters the namespace with setns()
from the calling thread: measured by bench/netns_methods.py on the 2-core target, ms
per namespace with a pool of 4 threads, 1.2 against 1.8 for `ip -n NS -batch -` and 4.5
for pyroute2 (see hoplab.nodes.netns).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab.errors import LabError

if TYPE_CHECKING:
    from hoplab.nodes.executor import Executor
    from hoplab.nodes.netns_exec import NetnsExecutor

# subprocess is imported where it is used: commands that only look namespaces up
# should not pay for it at start-up.


def ip_batch(lines: Sequence[str], what: str, ex: Executor | None = None) -> None:
    """Run `ip -batch -` in ex's namespace (this machine's own without one); a failure
    names the command."""
    _batch(["ip"], lines, what, ex)


def tc_batch(lines: Sequence[str], what: str, ex: Executor | None = None) -> None:
    _batch(["tc"], lines, what, ex)


def _batch(tool: list[str], lines: Sequence[str], what: str,
           ex: Executor | None) -> None:
    if not lines:
        return
    argv, text = [*tool, "-batch", "-"], "\n".join(lines) + "\n"
    if ex is None:
        import subprocess

        done = subprocess.run(argv, input=text, capture_output=True, text=True, check=False)
        code, stderr = done.returncode, done.stderr
    else:
        got = ex.run(argv, input=text, timeout=300)
        code, stderr = got.returncode, got.stderr
    if code != 0:
        raise LabError(f"{what}: {tool[0]} failed: {batch_error(stderr, lines)}")


def batch_error(stderr: str, lines: Sequence[str]) -> str:
    """iproute2 reports 'Command failed -:N'; show the command of line N."""
    msg = " ".join(stderr.split())
    for token in stderr.split():
        if token.startswith("-:") and token[2:].isdigit():
            n = int(token[2:])
            if 0 < n <= len(lines):
                return f"{msg} [{lines[n - 1].strip()}]"
    return msg


def write_sysctls(ex: NetnsExecutor, values: Iterable[tuple[str, str]]) -> None:
    """Write net.* sysctls of ex's namespace (from Python, in the namespace: no child)."""
    with ex.inside():
        for key, value in values:
            path = Path("/proc/sys") / key.replace(".", "/")
            try:
                path.write_text(f"{value}\n")
            except FileNotFoundError:
                raise LabError(f"sysctl {key} does not exist in this kernel") from None
            except OSError as exc:
                raise LabError(f"sysctl {key} = {value}: {exc.strerror}") from None


