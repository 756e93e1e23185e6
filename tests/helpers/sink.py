"""A run store that keeps what the runner saves in memory, for tests of the runner."""

from __future__ import annotations

from hoplab.record import RunRecord


class Sink:
    def __init__(self) -> None:
        self.saved: list[RunRecord] = []

    def save_run(self, run: RunRecord) -> int:
        self.saved.append(run)
        return len(self.saved)
