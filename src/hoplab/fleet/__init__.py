"""A fleet: benches (`hoplab worker`) that take the runs of submitted experiments from one
queue in the team's PostgreSQL store (procrastinate's tables, beside hoplab's own)."""
