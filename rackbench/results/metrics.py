"""Every number rackbench reports about a point, defined once: its name, label, unit (how it reads: the one
formatter, rackbench.core.format), which way is better, where it is shown, and how it compares across runs.

Every output reads this table: junit properties and points.csv (every metric), the summary table and the terminal
(``shown``), report.md and report.html, the results history (every metric is stored by name), run-to-run noise
and ``rackbench compare`` (``compared``). A metric added here appears in all of them; a site can add its own
with :func:`register`.

How a compared metric is compared (rackbench.history.compare):

* ``change="ratio"``: B / A - 1, with run-to-run noise pooled on the log scale where the history has repeats;
* ``change="difference"``: B - A (a share, such as the error rate: usually 0 in every repeat, so never pooled);
* ``bootstrap``: how one run's interval is resampled when there are no repeats: by 5 s slices of the window
  (``"time"``: a rate; ``per_slice`` gives each request's part of it, summed over the requests that ended in a
  slice, and ``per_gpu`` divides it by the point's GPUs) or by request (``"request"``: the per-request value
  ``request`` gives, reduced by ``reduce``). Both read a request by name (rackbench.load.records.Request).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal

from rackbench.core.format import UNITS
from rackbench.load.records import Request
from rackbench.results.model import PointResult
from rackbench.results.slo import headline

Place = Literal["summary", "terminal", "report"]


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str                                           # rackbench.core.format.UNITS
    get: Callable[[PointResult], float | int | None]
    better: Literal["higher", "lower"] | None = None    # None: a description, not a quality
    shown: frozenset[str] = frozenset()                 # summary | terminal | report
    compared: bool = False                              # compared across runs (compare, noise, --compare-run)
    change: Literal["ratio", "difference"] = "ratio"
    bootstrap: Literal["time", "request"] | None = None
    request: Callable[[Request], float | None] | None = None   # bootstrap "request": its value (None: skip it)
    reduce: Literal["mean", "median", "p99"] = "mean"
    per_slice: Callable[[Request], float | None] | None = None  # bootstrap "time": its part of the rate (None: none)
    per_gpu: bool = False                                       # bootstrap "time": the rate divided by the GPUs

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.name}: unknown unit {self.unit!r} (known: {', '.join(UNITS)})")
        if self.compared and self.better is None:
            raise ValueError(f"metric {self.name}: a compared metric needs better='higher' or 'lower'")
        if self.bootstrap == "request" and self.request is None:
            raise ValueError(f"metric {self.name}: bootstrap by request needs request=<a request's value>")
        if self.bootstrap == "time" and self.per_slice is None:
            raise ValueError(f"metric {self.name}: bootstrap by time needs per_slice=<a request's part of the rate>")

    @property
    def pooled(self) -> bool:
        """Whether run-to-run noise is pooled for it (positive quantities compared as ratios)."""
        return self.compared and self.change == "ratio"


def _server(fn: Callable[[Any], Any]) -> Callable[[PointResult], Any]:
    return lambda r: fn(r.server) if r.server is not None else None


def _tier(fn: Callable[[Any], Any]) -> Callable[[PointResult], Any]:
    """A value of the point's headline SLO tier (the gated one, else the first; rackbench.results.slo)."""
    def get(r: PointResult) -> Any:
        t = headline(r.slo)
        return fn(t) if t is not None else None
    return get


def _per_user(q: Request) -> float | None:
    if not q.ok or q.latency_ms is None or q.ttft_ms is None or q.latency_ms <= q.ttft_ms:
        return None
    return ((q.output_tokens or 0.0) - 1) / (q.latency_ms - q.ttft_ms) * 1000


def _ttft(q: Request) -> float | None:
    return q.ttft_ms if q.ok else None


def _output_tokens(q: Request) -> float | None:
    return (q.output_tokens or 0.0) if q.ok else None


def _tokens(q: Request) -> float | None:
    """Prompt and output tokens (None where the prompt was not counted: an older history's request)."""
    return (q.output_tokens or 0.0) + q.input_tokens if q.ok and q.input_tokens is not None else None


ALL = frozenset({"summary", "terminal", "report"})
METRICS: dict[str, Metric] = {}


def _intended(r: PointResult, what: str) -> float | None:
    """A p99 counted from each request's credit (rackbench.results.omission), where the generator gave credits."""
    got = r.latency_ms.from_intended
    return getattr(got, what).p99 if got is not None else None


def register(metric: Metric) -> Metric:
    """Add a metric (a site's, or a new one of rackbench's); its name must be new."""
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is already defined")
    METRICS[metric.name] = metric
    return metric


@contextmanager
def registered(metric: Metric) -> Iterator[Metric]:
    """A metric defined for the duration of a block (tests, one-off analyses)."""
    register(metric)
    try:
        yield metric
    finally:
        METRICS.pop(metric.name, None)


for _m in (
    Metric("output_tps", "output tok/s", "tok/s", lambda r: r.throughput.output_tps, "higher", ALL),
    Metric("output_tps_per_gpu", "output tok/s per GPU", "tok/s", lambda r: r.throughput.output_tps_per_gpu,
           "higher", ALL, compared=True, bootstrap="time", per_slice=_output_tokens, per_gpu=True),
    Metric("total_tps_per_gpu", "total tok/s per GPU", "tok/s", lambda r: r.throughput.total_tps_per_gpu, "higher",
           compared=True, bootstrap="time", per_slice=_tokens, per_gpu=True),
    Metric("gpus", "GPUs", "count", lambda r: r.throughput.gpus),
    Metric("tps_per_user_p50", "tok/s per user p50", "tok/s", lambda r: r.interactivity.output_tps_per_user.p50,
           "higher", ALL, compared=True, bootstrap="request", request=_per_user, reduce="median"),
    Metric("ttft_p50_ms", "TTFT p50 ms", "ms", lambda r: r.latency_ms.ttft.p50, "lower",
           frozenset({"summary", "report"}), compared=True, bootstrap="request", request=_ttft, reduce="median"),
    Metric("ttft_p99_ms", "TTFT p99 ms", "ms", lambda r: r.latency_ms.ttft.p99, "lower", compared=True,
           bootstrap="request", request=_ttft, reduce="p99"),
    Metric("ttft_p99_intended_ms", "TTFT p99 from the schedule ms", "ms", lambda r: _intended(r, "ttft"), "lower"),
    Metric("e2e_p99_intended_ms", "E2E p99 from the schedule ms", "ms", lambda r: _intended(r, "e2e"), "lower"),
    Metric("send_delay_p99_ms", "send delay p99 ms", "ms", lambda r: _intended(r, "delay_ms"), "lower"),
    Metric("itl_p50_ms", "ITL p50 ms", "ms", lambda r: r.latency_ms.itl.p50, "lower", frozenset({"report"})),
    Metric("e2e_p50_ms", "E2E p50 ms", "ms", lambda r: r.latency_ms.e2e.p50, "lower"),
    Metric("error_rate", "error rate", "share", lambda r: r.requests.error_rate, "lower", ALL, compared=True,
           change="difference", bootstrap="request", request=lambda q: 0.0 if q.ok else 1.0),
    Metric("successful_requests", "successful requests", "count", lambda r: r.requests.successful, "higher"),
    Metric("effective_concurrency", "effective concurrency", "conc", lambda r: r.concurrency.effective_avg, None,
           frozenset({"summary", "report"})),
    Metric("prefix_cache_hit_rate", "prefix cache hit rate", "share", _server(lambda s: s.prefix_cache_hit_rate)),
    Metric("cpu_tier_hit_share", "CPU-tier share", "share", _server(lambda s: s.prompt_token_shares.cpu_tier),
           None, ALL),
    Metric("prompt_tokens_from_cpu_tier", "prompt tokens from the CPU tier", "count",
           _server(lambda s: s.prompt_tokens_external), None, frozenset({"summary"})),
    Metric("output_token_ratio", "generator / server output tokens", "ratio", lambda r: r.output_token_ratio),
    Metric("slo_attainment", "SLO attainment", "share", _tier(lambda t: t.attainment), "higher",
           frozenset({"summary", "report"})),
    Metric("slo_attainment_low", "SLO attainment, 95% low", "share", _tier(lambda t: t.low), "higher"),
    Metric("goodput_rps", "goodput req/s", "rate", _tier(lambda t: t.goodput_rps), "higher"),
    Metric("good_output_tps_per_gpu", "good output tok/s per GPU", "tok/s", _tier(lambda t: t.good_output_tps_per_gpu),
           "higher", frozenset({"summary", "report"})),
    Metric("joules_per_output_token", "GPU J per output token", "J/tok",
           lambda r: r.economics.joules_per_output_token if r.economics else None, "lower",
           frozenset({"summary", "report"})),
    Metric("cost_per_m_output_tokens", "cost per 1M output tokens", "price",
           lambda r: r.economics.cost_per_m_output_tokens if r.economics else None, "lower",
           frozenset({"summary", "report"})),
):
    register(_m)


def values(result: PointResult) -> dict[str, Any]:
    """Every metric of one point, by name."""
    return {name: m.get(result) for name, m in METRICS.items()}


def shown(place: str) -> list[Metric]:
    return [m for m in METRICS.values() if place in m.shown]


def compared() -> list[Metric]:
    return [m for m in METRICS.values() if m.compared]


# Identity columns of points.csv, before the metrics.
IDENTITY: dict[str, Callable[[PointResult], Any]] = {
    "case_id": lambda r: r.identity.case_id, "profile": lambda r: r.identity.profile,
    "model": lambda r: r.identity.model, "cluster": lambda r: r.identity.cluster,
    "concurrency": lambda r: r.identity.concurrency, "tp": lambda r: r.identity.layout.tp,
    "dp": lambda r: r.identity.layout.dp, "ep": lambda r: r.identity.layout.ep,
    "offload": lambda r: r.identity.offload.enabled, "recipe_fingerprint": lambda r: r.identity.recipe_fingerprint,
    "run_id": lambda r: r.identity.run_id,
}
