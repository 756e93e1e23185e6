"""Which bench takes which job: a job asks for some benches (--bench, any of them) and
some labels (--where, all of them), and sits in the queue of that route; a bench takes
from the queue every job may go to, and from those of the routes it matches."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from hoplab.fleet.queue.app import ANY_QUEUE


def queue_of(benches: Sequence[str], where: Mapping[str, str]) -> str:
    """The queue of a route; ANY_QUEUE when the jobs may go to any bench."""
    if not benches and not where:
        return ANY_QUEUE
    key = json.dumps({"benches": sorted(set(benches)), "where": dict(sorted(where.items()))})
    return f"{ANY_QUEUE}:{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def matches(bench: str, labels: Mapping[str, str], benches: Sequence[str],
            where: Mapping[str, str]) -> bool:
    """Whether a bench of this name and labels may take a job of this route."""
    return (not benches or bench in benches) and \
        all(labels.get(k) == v for k, v in where.items())
