"""perf on a device costs a command per step (an SSH round trip, 0.2 to 0.5 s to a VM
under TCG): hoplab.profile.record.Recording asks where perf is once, and takes its files
and its own directory away in one command, once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hoplab.nodes.executor import Completed
from hoplab.profile.record import Recording


class Device:
    """A node's executor as Recording uses it here: which() and run(), each logged."""

    node = "r1"

    def __init__(self, rmdir_rc: int = 0) -> None:
        self.commands: list[Sequence[str]] = []
        self.rmdir_rc = rmdir_rc

    def which(self, names: Sequence[str]) -> dict[str, str]:
        self.commands.append(["which", *names])
        return {"perf": "/usr/bin/perf"}

    def run(self, argv: Sequence[str], **_: Any) -> Completed:
        self.commands.append(list(argv))
        rc = self.rmdir_rc if "rmdir" in " ".join(argv) else 0
        return Completed(tuple(argv), rc, "", "")


def test_perf_is_looked_for_once() -> None:
    dev = Device()
    rec = Recording(Path("/run/hoplab/x/t.perf.data"), 99, node=dev)   # type: ignore[arg-type]
    assert rec._perf() == rec._perf() == "/usr/bin/perf"
    assert dev.commands == [["which", "perf"]]


def test_files_and_own_directory_go_in_one_command_once() -> None:
    dev = Device()
    data = Path("/run/hoplab/x/t.perf.data")
    rec = Recording(data, 99, node=dev, own_dir=True)   # type: ignore[arg-type]
    assert rec.remove() is True and rec.remove() is True
    (only,) = dev.commands
    assert only[:3] == ["sh", "-c", 'rm -f "$@" && rmdir "$0"']
    assert only[3] == str(data.parent)
    assert only[4:] == [str(data), str(data.with_suffix(".script")),
                        str(data.with_suffix(".ctl")), str(data.with_suffix(".ack"))]


def test_a_directory_still_in_use_stays() -> None:
    # An emulated device's directory is this machine's run directory: rmdir fails there.
    dev = Device(rmdir_rc=1)
    rec = Recording(Path("/tmp/run/t.perf.data"), 99, node=dev, own_dir=True)  # type: ignore[arg-type]
    assert rec.remove() is False and rec.remove() is False and len(dev.commands) == 1
    plain = Device()
    rec = Recording(Path("/tmp/run/t.perf.data"), 99, node=plain)   # type: ignore[arg-type]
    assert rec.remove() is False and plain.commands[0][:2] == ["rm", "-f"]
