"""Ctrl-C in the middle of an experiment keeps the finished runs and leaves nothing."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from hoplab.store import open_store
from tests.helpers.lab import HOPLAB, lab_namespaces, new_lab_name, pids_in

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_ctrl_c_keeps_finished_runs_and_marks_the_current_one(tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(f'lab = "{Path(__file__).resolve().parents[2]}/examples/chain.toml"\n'
                   'repeat = 8\npause = "0s"\n'
                   '[[tests]]\nname = "bulk"\nkind = "tcp"\nfrom = "client"\nto = "server"\n'
                   'duration = "1s"\n')
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(db), "--lab-name", name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and done < 2:
            time.sleep(0.2)
            if db.exists():
                with open_store(str(db)) as store:
                    done = len(store.list_runs())
        assert done >= 2, "two runs should have finished within a minute"
        # Part way into the next run: its iperf3 processes are running.
        time.sleep(0.5)
        inside = pids_in(lab_namespaces(name))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    with open_store(str(db)) as store:
        runs = store.list_runs()
        statuses = [r.status for r in runs]
        assert statuses.count("interrupted") == 1 and statuses[-1] == "interrupted"
        assert statuses.count("ok") == len(runs) - 1 >= 2
        interrupted = store.get_run(runs[-1].id)
        assert interrupted.error is not None and "Ctrl-C" in interrupted.error
        kept = store.get_run(runs[0].id)
        assert kept.metric("goodput") is not None
    assert lab_namespaces(name) == set()
    # The tools that ran inside the lab are gone with it.
    alive = [pid for pid in inside if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]]
    assert alive == []
