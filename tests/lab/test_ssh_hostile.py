"""Hostile node names, destinations, options and arguments run nothing, on this
machine or on the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.errors import UsageError
from hoplab.nodes.executor import ExecutorError
from hoplab.nodes.ssh_exec import SshExecutor
from hoplab.nodes.ssh_target import SshTarget, SshTargetError
from tests.helpers.devices import Farm, Kind

pytestmark = pytest.mark.root
MARK = "/tmp/hl-hostile-ran"
HOSTILE = [f"x;touch {MARK}", f"$(touch {MARK})", f"`touch {MARK}`", f"x && touch {MARK}",
           f"x|touch {MARK}", f"-oProxyCommand=touch {MARK}", f"x\ntouch {MARK}", "-J evil"]


@pytest.fixture(autouse=True)
def _no_mark() -> None:
    Path(MARK).unlink(missing_ok=True)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_target_values_refused_before_anything_runs(device_farm: Farm,
                                                            value: str) -> None:
    dev = device_farm.shared("openwrt-like")
    good = {"node": "r1", "destination": f"root@{dev.address}"}
    for field, bad in (("node", value), ("destination", value),
                       ("destination", f"root@{value}"), ("destination", f"{value}@host"),
                       ("jump", value), ("identity", "-" + value),
                       ("known_hosts", "-" + value)):
        with pytest.raises(SshTargetError) as info:
            SshTarget(**{**good, field: bad})  # type: ignore[arg-type]
        assert isinstance(info.value, UsageError)      # exit 2
    for port in (0, 70000, "22; touch x", True):
        with pytest.raises(SshTargetError, match="port"):
            SshTarget(**good, port=port)  # type: ignore[arg-type]
    assert not Path(MARK).exists()
    assert dev.exec("test", "-e", MARK).returncode != 0


def test_hostile_arguments_are_data_on_the_device(device_farm: Farm, tmp_path: Path) -> None:
    kinds: list[Kind] = ["openwrt-like", "linux-board"]
    for kind in kinds:
        dev = device_farm.shared(kind)
        ex = SshExecutor(dev.target("r1"))
        try:
            res = ex.run(["echo", *HOSTILE])
            assert res.stdout == " ".join(HOSTILE) + "\n"
            assert ex.run(["sh", "-c", 'printf %s "$1"', "sh", HOSTILE[0]],
                          env={"HL": HOSTILE[1]}).stdout == HOSTILE[0]
            for value in HOSTILE:
                assert ex.read_file(value) is None
                assert ex.which([value]) == {value: None}
                with pytest.raises(ExecutorError):
                    ex.copy_back(value, tmp_path / "x")
                assert ex.run([value]).returncode == 127
            p = ex.start("h", ["sleep", "60", *HOSTILE[:1]], out=tmp_path / "o",
                         err=tmp_path / "e")
            ex.stop(p)
            with pytest.raises(ValueError, match="environment"):
                ex.run(["true"], env={f"X;touch {MARK}": "1"})
        finally:
            ex.close()
        assert dev.exec("test", "-e", MARK).returncode != 0, kind
    assert not Path(MARK).exists()
