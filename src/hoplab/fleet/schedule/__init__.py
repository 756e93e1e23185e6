"""Schedules and alerts: experiments submitted on a cron (schedules.py, firing.py, the
minute tick in tasks.py), what their runs say against the last ones (judge.py), and the
alerts that say it (alerts.py, alert_post.py). Built on the queue (hoplab.fleet.queue)."""
