"""Bisection on benches, `hoplab bisect run --fleet`: the driver's search over commits
(driver.py, kary.py) and a bench's side, the job "measure commit SHA" (jobs.py). Built on
the queue (hoplab.fleet.queue)."""
