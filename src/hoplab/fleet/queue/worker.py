"""`hoplab worker`: a bench's loop. It takes one job at a time from the queues it may
serve, runs it (hoplab.fleet.queue.jobs) and marks it done; with no job waiting it takes its
lab down and waits for a notification (or the next poll).

Signals: the first SIGTERM or SIGHUP (or `hoplab fleet drain`) lets the current run
finish (the bench says `draining` in the fleet once it has noted it), then the lab
comes down and the bench exits 0. Ctrl-C, or a second signal,
interrupts the run: it is stored as interrupted and its job goes back to the queue.
`hoplab fleet cancel` of the job's experiment interrupts its run too (the beat thread
hands it to the main thread as SIGUSR1, again each heartbeat while a teardown is under
way): stored as cancelled, its job ended (aborted), the lab down, and the bench serves on.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from procrastinate.exceptions import ConnectorException

from hoplab import kv
from hoplab.errors import Cancelled, HoplabError
from hoplab.fleet.queue.app import ANY_QUEUE
from hoplab.fleet.queue.beat import Beat
from hoplab.fleet.queue.jobs import JobArgs
from hoplab.fleet.queue.routes import matches
from hoplab.lab.signals import noting_stops, quiet
from hoplab.store.url import hide_password

if TYPE_CHECKING:
    from hoplab.fleet.queue.bundle import Query
    from hoplab.record import RunRecord

_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Runs(Protocol):
    """What runs a bench's jobs: hoplab.fleet.queue.jobs.BenchRuns (bench/fleet.py gives one on
    fake nodes)."""

    def bind(self, query: Query) -> None: ...
    def already_ok(self, job: JobArgs) -> bool: ...
    def run(self, job: JobArgs, experiment_labels: Mapping[str, str]) -> RunRecord: ...
    def idle(self) -> None: ...
    def remove(self) -> None: ...


# A job of a task other than a run's, as the package that queues it serves it on a bench
# (hoplab.fleet.bisect.jobs.serve_job, for `hoplab bisect run --fleet`): the job (its
# attempt is its fencing token, as a run job's), the bench's runs and Beat.query. The
# bench marks it done when it returns, failed when it raises.
Serve = Callable[["OtherJob", Runs, Callable[..., list[dict[str, Any]]]], None]


@dataclass(frozen=True)
class OtherJob:
    job_id: int
    task: str
    args: Mapping[str, Any] = field(default_factory=dict)
    attempt: int = 0


@dataclass(frozen=True)
class BenchConfig:
    name: str
    labels: Mapping[str, str]
    lab_name: str
    heartbeat_s: float = 10.0
    # Without a notification, how often an idle bench looks for a job.
    poll_s: float = 2.0
    # One of a bench's `--concurrency` workers: its row in the fleet is NAME#SLOT.
    slot: int | None = None

    @property
    def row(self) -> str:
        return self.name if self.slot is None else f"{self.name}#{self.slot}"


@dataclass
class Claim:
    """One job taken: how long the claim took (the bench's figure of the queue)."""

    job_id: int
    seconds: float


class BenchWorker:
    def __init__(self, db_url: str | None, config: BenchConfig, runs: Runs,
                 tasks: Mapping[str, Serve] | None = None) -> None:
        self.db_url = db_url
        self.config = config
        self.runs = runs
        self.tasks = dict(tasks or {})
        self.stopping = False
        self.interrupted = False
        # A second signal cut the lab's teardown short: `hoplab clean` removes the rest.
        self.lab_left = False
        self.claims: list[Claim] = []
        self._running = False
        # The job whose run is under way, and a job asked to stop (fleet cancel).
        self._job: int | None = None
        self._cancel: int | None = None
        # Stop signals heard, and whether the bench is taking its lab down (_take_down).
        self._heard = 0
        self._tearing_down = False
        self._wake = threading.Event()
        self._queues: list[str] = [ANY_QUEUE]
        self.beat = Beat(db_url, config.row, heartbeat_s=config.heartbeat_s,
                         on_wake=self._wake.set, on_drain=self._drain,
                         on_cancel=self._cancelled)
        runs.bind(self.beat.query)

    # --- signals ---------------------------------------------------------------------

    def _drain(self) -> None:
        self.stopping = True
        self.beat.draining()
        self._wake.set()

    def _note(self, signum: int) -> bool:
        """A stop signal: whether it interrupts the run (Ctrl-C, or a second signal during
        a run), else the bench stops after its run."""
        self._heard += 1
        if signum != signal.SIGINT and not (self.stopping and self._running):
            self._drain()
            return False
        self.interrupted = True
        return True

    def _signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._note(signum):
            # The unwinding (storing the run, the lab down, the job put back) must not
            # be cut short by a third signal.
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_IGN)
            raise KeyboardInterrupt(f"signal {signum}")

    def _cancelled(self, job_id: int) -> None:
        """On the beat's thread: the job's run is to stop; the main thread hears it."""
        self._cancel = job_id
        if self._running and self._job == job_id:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)

    def _stop_cancelled(self, _signum: int, _frame: FrameType | None) -> None:
        # In a teardown, or unwinding for a signal: the next heartbeat asks again.
        if self._running and self._cancel == self._job and not quiet():
            self._cancel = None
            raise Cancelled("cancelled by `hoplab fleet cancel`")

    # --- the loop --------------------------------------------------------------------

    def _routes(self) -> None:
        rows = self.beat.query("SELECT queue, benches, where_labels FROM hoplab_fleet_routes")
        mine = sorted(str(r["queue"]) for r in rows
                      if matches(self.config.name, self.config.labels, list(r["benches"]),
                                 dict(r["where_labels"])))
        self._queues = [ANY_QUEUE, *mine]

    def _state(self, state: str, job_id: int | None) -> None:
        self.beat.execute("UPDATE hoplab_fleet_benches SET state = %(state)s, current_job = "
                          "%(job)s WHERE name = %(name)s AND state <> 'draining'",
                          state=state, job=job_id, name=self.config.row)

    def _experiment(self, experiment_id: str) -> tuple[dict[str, str], bool]:
        rows = self.beat.query("SELECT labels, cancelled FROM hoplab_fleet_experiments "
                               "WHERE id = %(id)s", id=experiment_id)
        if not rows:
            return {}, False
        return dict(rows[0]["labels"]), bool(rows[0]["cancelled"])

    def _take(self) -> JobArgs | OtherJob | None:
        t0 = time.perf_counter()
        job = self.beat.fetch(self._queues)
        if job is None or job.id is None:
            return None
        self.claims.append(Claim(job.id, time.perf_counter() - t0))
        if job.task_name in self.tasks:
            return OtherJob(job.id, job.task_name, job.task_kwargs, job.attempts)
        return JobArgs.of(job.id, job.task_kwargs, job.attempts)

    def _do(self, job: JobArgs) -> None:
        self._state("busy", job.job_id)
        labels, cancelled = self._experiment(job.experiment_id)
        if cancelled:
            self.beat.finish(job.job_id, False)
            return
        if self.runs.already_ok(job):
            self.beat.finish(job.job_id, True)
            return
        self._running, self._job = True, job.job_id
        try:
            rec = self.runs.run(job, labels)
        except Cancelled:
            self.beat.end(job.job_id, "aborted")
            self.runs.idle()
            return
        except KeyboardInterrupt:
            self.beat.retry(job.job_id)
            raise
        except Exception as e:  # cannot run it here at all (a tool missing, a bad bundle)
            self._error(job, e)
            self.beat.finish(job.job_id, False)
            return
        finally:
            self._running, self._job = False, None
        self.beat.finish(job.job_id, rec.status == "ok")

    def _other(self, job: OtherJob) -> None:
        """A job of one of `tasks` (a commit of `hoplab bisect run --fleet`)."""
        self._state("busy", job.job_id)
        self.runs.idle()  # the bench's lab down: the job's runs take its name
        self._running = True
        try:
            self.tasks[job.task](job, self.runs, self.beat.query)
        except KeyboardInterrupt:
            self.beat.retry(job.job_id)
            raise
        except Exception as e:  # said, and the driver stops on it
            self._error(job, e)
            self.beat.finish(job.job_id, False)
            return
        finally:
            self._running = False
        self.beat.finish(job.job_id, True)

    def _error(self, job: JobArgs | OtherJob, e: Exception) -> None:
        # A HoplabError is a sentence for the user; anything else keeps its type.
        said = str(e) if isinstance(e, HoplabError) else f"{type(e).__name__}: {e}"
        print(f"hoplab: job {job.job_id} cannot run on this bench: {said}", file=sys.stderr,
              flush=True)
        self.beat.execute(
            "INSERT INTO hoplab_fleet_errors (job_id, bench, error) VALUES (%(job)s, "
            "%(bench)s, %(error)s) ON CONFLICT (job_id) DO UPDATE SET bench = "
            "EXCLUDED.bench, error = EXCLUDED.error, at = now()",
            job=job.job_id, bench=self.config.row, error=said)

    def serve(self) -> int:
        """Take jobs until stopped; 0, or 130 when a run (or a teardown) was interrupted."""
        old = {sig: signal.signal(sig, self._signal) for sig in _STOPS}
        old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, self._stop_cancelled)
        try:
            with noting_stops(self._note, self._breaks):
                try:
                    self._loop()
                except KeyboardInterrupt:
                    self.interrupted = True
                # The lab down first; then the bench says it stopped.
                self._take_down(self.runs.remove)
        finally:
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_IGN)
            try:
                self.runs.remove()  # what is left, if the above did not get to it
            finally:
                self.beat.stop()
                for sig, handler in old.items():
                    signal.signal(sig, handler)
        return 130 if self.interrupted else 0

    def _breaks(self, _signum: int) -> bool:
        """A stop signal in a shielded teardown: it interrupts the bench's own taking
        down of its lab when it is the second one (a teardown that hangs on a device
        must not keep a bench that was told twice to stop)."""
        return self._tearing_down and self._heard >= 2

    def _take_down(self, how: Callable[[], None]) -> None:
        """The lab down (between jobs, or at the end); a second stop signal interrupts
        it: the bench stops, the rest of the lab left for `hoplab clean`."""
        for sig in _STOPS:   # an interrupted run's unwinding ignored them; now they count
            signal.signal(sig, self._signal)
        self._tearing_down = True
        try:
            how()
        except KeyboardInterrupt:
            self.interrupted = self.stopping = self.lab_left = True
            print(f"hoplab: bench {self.config.row}: taking lab {self.config.lab_name} "
                  f"down was interrupted: `hoplab clean {self.config.lab_name}` removes "
                  f"what is left", file=sys.stderr, flush=True)
        finally:
            self._tearing_down = False

    def _loop(self) -> None:
        self.beat.start(self.config.labels, socket.gethostname(), os.getpid())
        self._routes()
        while not self.stopping:
            try:
                job = self._take()
            except ConnectorException as e:
                # The store is unreachable for now: the pool reconnects; try again.
                print(f"hoplab: warning: cannot reach the queue: {hide_password(str(e))}",
                      file=sys.stderr, flush=True)
                self._wake.wait(self.config.poll_s)
                continue
            if job is None:
                self._state("idle", None)
                self._take_down(self.runs.idle)
                if self.stopping:
                    break
                self._wake.wait(self.config.poll_s)
                self._wake.clear()
                self._routes()
                continue
            if isinstance(job, OtherJob):
                self._other(job)
            else:
                self._do(job)


def describe(config: BenchConfig) -> str:
    """"bench erx-1 (device=erx), lab hoplab-erx-1": labels as a selection writes them,
    and none where there are none (was a Python dict: "bench nuone ({})")."""
    labels = f" ({kv.pairs(config.labels)})" if config.labels else ""
    return f"bench {config.row}{labels}, lab {config.lab_name}"
