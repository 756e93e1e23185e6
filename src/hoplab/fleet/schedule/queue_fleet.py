"""What tick asks of the fleet, from the fleet's own functions and tables:
submit.enqueue and finished, and the benches' heartbeats."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hoplab.fleet.queue.db import connect
from hoplab.fleet.queue.schema import QUEUE
from hoplab.fleet.queue.submit import enqueue, finished


@dataclass(frozen=True)
class Bench:
    name: str
    labels: Mapping[str, str]
    last_heartbeat: dt.datetime


class QueueFleet:
    def __init__(self, db_url: str | None) -> None:
        self.db_url = db_url

    def enqueue(self, bundle: str, *, benches: Sequence[str], where: Mapping[str, str],
                labels: Mapping[str, str]) -> str:
        return enqueue(self.db_url, bundle, benches=benches, where=where, labels=labels)

    def finished(self, experiment_id: str) -> bool:
        return finished(self.db_url, experiment_id)

    def benches(self) -> list[Bench]:
        """Every bench that has not said it stopped, with its last heartbeat."""
        with connect(self.db_url, tables=[QUEUE]) as conn:
            rows = conn.execute("SELECT name, labels, heartbeat FROM hoplab_fleet_benches "
                                "WHERE state <> 'stopped' ORDER BY name").fetchall()
        return [Bench(name=str(n), labels=dict(labels), last_heartbeat=beat)
                for n, labels, beat in rows]
