"""The queue and its benches: one connection to the store and one way to make tables
(db.py), the fleet's tables (schema.py), submitting experiments (submit.py, bundle.py,
routes.py) and a bench's loop that runs their jobs (worker.py, beat.py, jobs.py,
devices.py). It knows nothing of schedules or bisections, which are built on it."""
