"""Compare measurements of the same point, A against B, with a 95% interval and a verdict (pure: no I/O), for every
compared metric of the registry (servebench.results.metrics).

Two sources of confidence, the better one first:

- **Run-to-run** (servebench.history.noise): when the history holds repeated points of the cluster (the same case
  and recipe fingerprint measured in several runs that are not on trial), their pooled spread gives the interval
  of the change between the runs of A and of B. It covers everything that varies between runs of an unchanged
  recipe.
- **Within-run bootstrap**, when there are no repeats (and always for a share such as the error rate): each side's
  records are resampled with replacement (2,000 draws, fixed seed) and the statistic recomputed. A rate is
  resampled by time (the window cut into 5 s slices, each holding the metric's own quantity of the requests that
  ended in it: output tokens for output tok/s, prompt and output tokens for total tok/s); a per-request statistic
  by request. It assumes the requests of one run are exchangeable draws from that run's conditions: it covers which
  requests landed in the window, not the machine's run-to-run noise, so it can call noise a change.

A point is *better* or *worse* when the interval of its change excludes no change, else *within noise*; with too
few repeats for run-to-run noise and no records to bootstrap, it says so instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from servebench.core.format import interval, number
from servebench.history.noise import Noise, change as noise_change
from servebench.load.records import Request
from servebench.results import metrics as registry

DRAWS = 2000
BOOTSTRAP_SLICE_S = 5.0
CHUNK = 250     # draws resampled at once: bounds the memory of a point with many requests
BOOTSTRAP = "within-run bootstrap"


@dataclass(frozen=True)
class Change:
    metric: str
    a: float | None
    b: float | None
    rel: float | None          # b / a - 1 (a difference metric: b - a)
    low: float | None          # interval of rel (None without one)
    high: float | None
    verdict: str               # better | worse | within noise | no records | too few repeats
    basis: str = BOOTSTRAP     # or servebench.history.noise.Noise.describe()

    @property
    def unit(self) -> str:
        """How the change reads (servebench.core.format)."""
        return "points" if registry.METRICS[self.metric].change == "difference" else "change"

    def text(self) -> str:
        """The change with its interval and verdict, as every output writes it: ``+12.3% [+1.0%, +20.0%]  better``."""
        if self.rel is None:
            return self.verdict
        span = interval(self.low, self.high, self.unit)
        return f"{number(self.rel, self.unit)}{' ' + span if span else ''}  {self.verdict}"


def _slices(metric: registry.Metric, requests: Sequence[Request]) -> np.ndarray:
    """The metric's quantity (``per_slice``) of the requests that ended in each BOOTSTRAP_SLICE_S of the window."""
    got = [(q.end_s, part) for q in requests if q.end_s is not None and (part := metric.per_slice(q)) is not None]
    if len(got) < 2:
        return np.zeros(0)
    ends, parts = np.array(got, dtype=float).T
    edges = np.arange(ends.min(), ends.max() + BOOTSTRAP_SLICE_S, BOOTSTRAP_SLICE_S)
    counts, _ = np.histogram(ends, bins=edges, weights=parts)
    return counts


def items(metric: registry.Metric, requests: Sequence[Request]) -> np.ndarray:
    """What the bootstrap resamples for ``metric``: slices of its own rate, or each request's value (a request
    a statistic does not count, such as a failed request's TTFT, is left out)."""
    if metric.bootstrap == "time":
        return _slices(metric, requests)
    values = [metric.request(q) for q in requests]
    return np.array([v for v in values if v is not None], dtype=float)


def _reduce(metric: registry.Metric, x: np.ndarray, gpus: int) -> np.ndarray:
    """The metric's statistic of each row of ``x``, a resample of its own that it may reorder (``overwrite_input``:
    the median and the 99th percentile partition it in place, not a copy of it: the same values, one copy fewer)."""
    if metric.bootstrap == "time":
        return np.mean(x, axis=-1) / BOOTSTRAP_SLICE_S / (gpus if metric.per_gpu else 1)
    if metric.reduce == "median":
        return np.median(x, axis=-1, overwrite_input=True)
    if metric.reduce == "p99":
        return np.percentile(x, 99, axis=-1, overwrite_input=True)
    return np.mean(x, axis=-1)


def _boot(metric: registry.Metric, x: np.ndarray, gpus: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(x), size=(DRAWS, len(x)))
    return np.concatenate([_reduce(metric, x[idx[i:i + CHUNK]], gpus) for i in range(0, DRAWS, CHUNK)])


def verdict(low: float, high: float, better: str) -> str:
    if low > 0:
        return "better" if better == "higher" else "worse"
    if high < 0:
        return "worse" if better == "higher" else "better"
    return "within noise"


def compare_point(a: dict, b: dict, seed: int = 0, metrics: tuple[str, ...] | None = None,
                  noise: dict[str, Noise | None] | None = None) -> list[Change]:
    """Changes from point ``a`` to point ``b`` (dicts of servebench.history.rows.point)."""
    return compare_groups([a], [b], seed, metrics, noise)


def compare_groups(a: Sequence[dict], b: Sequence[dict], seed: int = 0, metrics: tuple[str, ...] | None = None,
                   noise: dict[str, Noise | None] | None = None, few: set[str] = frozenset()) -> list[Change]:
    """Changes from the runs ``a`` of a point to its runs ``b``, for each compared metric (or ``metrics``), with
    the run-to-run ``noise`` of each metric where known, else by bootstrap. ``few``: metrics whose repeats were too
    few for run-to-run noise (said instead of a bootstrap-free "no records")."""
    rng = np.random.default_rng(seed)
    out = []
    for metric in registry.compared():
        if metrics is not None and metric.name not in metrics:
            continue
        va, vb = [p.get(metric.name) for p in a], [p.get(metric.name) for p in b]
        ma, mb = _mean(va), _mean(vb)
        rel = ((mb - ma) if metric.change == "difference" else (mb / ma - 1 if ma else None)) \
            if ma is not None and mb is not None else None
        known = (noise or {}).get(metric.name) if metric.pooled else None
        if known is not None and all(v is not None and v > 0 for v in va + vb):
            rel, low, high = noise_change(va, vb, known)
            out.append(Change(metric.name, ma, mb, rel, low, high, verdict(low, high, metric.better),
                              known.describe()))
            continue
        got = _bootstrap(metric, a, b, rng)
        if got is None:
            out.append(Change(metric.name, ma, mb, rel, None, None,
                              "too few repeats" if metric.name in few else "no records"))
        else:
            low, high = got
            out.append(Change(metric.name, ma, mb, rel, low, high, verdict(low, high, metric.better)))
    return out


def _mean(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else float(np.mean(values))


def _bootstrap(metric: registry.Metric, a: Sequence[dict], b: Sequence[dict], rng) -> tuple[float, float] | None:
    if metric.bootstrap is None or not all(len(p["requests"]) > 1 and p.get("duration_s") for p in (*a, *b)):
        return None
    sa, sb = (np.concatenate([items(metric, p["requests"]) for p in group]) for group in (a, b))
    sa, sb = sa[np.isfinite(sa)], sb[np.isfinite(sb)]
    if len(sa) < 2 or len(sb) < 2:
        return None
    ba, bb = _boot(metric, sa, a[0]["gpus"] or 1, rng), _boot(metric, sb, b[0]["gpus"] or 1, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = bb - ba if metric.change == "difference" else \
            np.where(ba != 0, bb / ba - 1, np.where(bb == 0, 0.0, np.nan))
    ratio = ratio[np.isfinite(ratio)]
    if not len(ratio):
        return None
    low, high = (float(x) for x in np.percentile(ratio, [2.5, 97.5]))
    return low, high
