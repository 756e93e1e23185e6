"""The one way hoplab makes data JSON-safe: JSON has no NaN or infinity.

A figure that could not be computed (NaN) or a broken tool output (inf) becomes
null, which a consumer reads as "not computable"; the store refuses NaN in JSON
columns (PostgreSQL's JSON has none), and `json.dumps(..., allow_nan=False)`
accepts what this returns. Used by every --json output, the dashboard's JSON and
the importers' metadata.
"""

from __future__ import annotations

import math
from typing import Any


def json_safe(value: Any) -> Any:
    """`value` with every NaN and infinity as None, in dicts (keys as text), lists and
    tuples too."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
