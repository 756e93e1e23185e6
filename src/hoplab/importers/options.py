"""What the user says about the files being imported: overrides and extra labels."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    """What the user says about the files: overrides and extra labels."""

    experiment: str | None = None
    test: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
