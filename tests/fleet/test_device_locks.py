"""Device locks follow the device, not its spelling: `root@127.0.0.1`, `localhost:22` and
`127.0.0.1` with port 22 are one device (its resolved address and port). A job waiting
for a device another run holds is shown by `hoplab fleet` (the job, the device, the
holder, since when) and, past the bench's lock timeout, fails naming the holder."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from hoplab.fleet.queue import devices, schema
from hoplab.fleet.queue.db import connect
from hoplab.fleet.queue.status import fleet_status
from hoplab.fleet.queue.submit import enqueue, pack
from hoplab.spec.loader import load_lab_text
from tests.fleet.benches import bench, fleet_said, query, until
from tests.helpers.lab import hoplab, new_lab_name

LAB = """name = "dl"
[nodes.a]
[nodes.b]
[nodes.router]
ssh = "{ssh}"
{port}
[[links]]
between = ["a", "b"]
"""

EXPERIMENT = """lab = "lab.toml"
repeat = 1
pause = "0s"
[[tests]]
name = "p"
kind = "ping"
from = "a"
to = "b"
duration = "1s"
"""


def _keys(ssh: str, port: int | None = None) -> list[str]:
    text = LAB.format(ssh=ssh, port="" if port is None else f"ssh_options = {{ port = {port} }}")
    return devices.device_keys(load_lab_text(text, "lab.toml"))


def test_one_device_under_two_spellings_is_one_lock(db: str) -> None:
    assert _keys("root@127.0.0.1") == _keys("admin@127.0.0.1", 22) == ["ssh:127.0.0.1:22"]
    # localhost resolves to 127.0.0.1 (and to ::1 where the machine has it).
    assert "ssh:127.0.0.1:22" in _keys("localhost")
    assert _keys("root@127.0.0.1", 2222) == ["ssh:127.0.0.1:2222"]
    connect(db, tables=[schema.QUEUE]).close()
    holds, release = threading.Event(), threading.Event()

    def hold() -> None:
        with devices.holding(db, _keys("localhost"), bench="b1", job_id=7):
            holds.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holds.wait(30)
        with pytest.raises(devices.DeviceBusy) as e, \
                devices.holding(db, _keys("root@127.0.0.1"), bench="b2", timeout_s=0.2):
            pass
        assert "device ssh:127.0.0.1:22 is held by bench b1 (job 7) since" in str(e.value)
        assert "waited more than the lock timeout (0.2 s)" in str(e.value)
        # Another device (another port) is free.
        with devices.holding(db, _keys("root@127.0.0.1", 2222), bench="b2", timeout_s=0.2):
            pass
    finally:
        release.set()
        holder.join(60)
    # Released with the block: the other spelling takes it at once.
    with devices.holding(db, _keys("root@127.0.0.1"), bench="b2", timeout_s=5):
        assert query(db, "SELECT bench FROM hoplab_fleet_device_holders") == [("b2",)]
    assert query(db, "SELECT bench FROM hoplab_fleet_device_holders") == []


@pytest.mark.root
@pytest.mark.slow
def test_a_job_waits_for_a_device_held_under_another_spelling_then_fails(
        db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The test holds the router as `localhost`; the submitted lab names it
    `root@127.0.0.1`. The bench's job waits (shown by `hoplab fleet`, read as soon as
    the wait is in the fleet's tables), and fails after its 5 s lock timeout, naming the
    holder; no lab was built."""
    (tmp_path / "lab.toml").write_text(LAB.format(ssh="root@127.0.0.1", port=""))
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    experiment_id = enqueue(db, pack(db, tmp_path / "exp.toml"))  # as `hoplab submit`
    name = new_lab_name()
    with devices.holding(db, _keys("localhost"), bench="holder", job_id=None), \
            bench(db, name, "--lock-timeout", "5") as b:
        waits = until("the job waiting for the router",
                      lambda: fleet_status(db).device_waits)
        said = fleet_said(capsys, db)
        (job_id,) = query(db, "SELECT id FROM procrastinate_jobs")[0]
        assert [(w.device, w.bench, w.job_id, w.held_by) for w in waits] == \
            [("ssh:127.0.0.1:22", name, job_id, "holder")]
        assert f"waiting: job {job_id} on bench {name} for device ssh:127.0.0.1:22 since" \
            in said and "held by bench holder since" in said, said
        until("the job failed", lambda: query(
            db, "SELECT 1 FROM procrastinate_jobs WHERE status = 'failed'"), timeout=60)
        b.send_signal(signal.SIGTERM)
        b.communicate(timeout=60)
    status = fleet_status(db).as_json()
    assert status["device_waits"] == []
    (failure,) = status["failures"]
    assert (failure["experiment_id"], failure["job_id"], failure["bench"],
            failure["run_id"]) == (experiment_id, job_id, name, None)
    assert failure["error"].startswith("device ssh:127.0.0.1:22 is held by bench holder "
                                       "since "), failure
    assert failure["error"].endswith("waited more than the lock timeout (5 s)")
    hoplab("clean", name)
