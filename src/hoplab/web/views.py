"""A dashboard view's state, and the link that opens it again (issue 21: links that keep
the view). Every choice a page offers (selections, metrics, filters, order, detector,
the step marked, the page of runs) is a query parameter, read by web/app.py and written
back here in one canonical spelling, so a copied link opens the same view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from hoplab.analysis import detectors

# Parameters that are a view's own, not filters: a filter on a label of one of these
# names travels in q= ("key=value key=value") instead.
RESERVED = frozenset({"q", "metric", "by", "order", "step", "page", "limit", "offset",
                      "detector"})


def _with_filters(params: dict[str, str], filters: Mapping[str, str]) -> str:
    plain = {k: v for k, v in filters.items() if k not in RESERVED and " " not in v}
    rest = " ".join(f"{k}={v}" for k, v in filters.items() if k not in plain)
    if rest:
        params["q"] = rest
    return urlencode({**params, **plain})


@dataclass(frozen=True)
class TrendView:
    metric: str
    by: str
    filters: Mapping[str, str] = field(default_factory=dict)
    order: str = "natural"
    detector: str = ""              # empty: the default
    step: str | None = None

    def link(self) -> str:
        params = {"metric": self.metric, "by": self.by, "order": self.order}
        if self.detector and self.detector != detectors.DEFAULT:
            params["detector"] = self.detector
        if self.step:
            params["step"] = self.step
        return "/trend?" + _with_filters(params, self.filters)


@dataclass(frozen=True)
class CompareView:
    a: str
    b: str
    metrics: tuple[str, ...] = ()
    per_flow: bool = False

    def link(self) -> str:
        params = {"a": self.a, "b": self.b}
        if self.metrics:
            params["metric"] = ",".join(self.metrics)
        if self.per_flow:
            params["per_flow"] = "1"
        return "/compare?" + urlencode(params)


def runs_link(filters: Mapping[str, str], page: int = 1) -> str:
    params = {"page": str(page)} if page > 1 else {}
    text = _with_filters(params, filters)
    return "/runs?" + text if text else "/runs"


@dataclass(frozen=True)
class OverlayView:
    selections: tuple[str, ...]

    def link(self) -> str:
        return "/overlay?" + urlencode([("sel", s) for s in self.selections])
