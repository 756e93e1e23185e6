"""A fleet: benches (`hoplab worker`) that take the runs of submitted experiments from one
queue in the team's PostgreSQL store (procrastinate's tables, beside hoplab's own).

Three packages, each importing only the one(s) below it (tests/unit/test_layers.py):

- schedule: schedules, their firings, judging what they ran, alerts;
- bisect: `hoplab bisect run --fleet`, a bisection measured on benches;
- queue: the queue and its benches: connecting to the store and its tables (db, schema),
  submitting, the bench's loop (worker, beat, jobs), devices' locks, the fleet's state.
"""
