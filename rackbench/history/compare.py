"""Compare measurements of the same point, A against B, with a 95% interval and a verdict (pure: no I/O), for every
compared metric of the registry (rackbench.results.metrics).

Two sources of confidence, the better one first:

- **Run-to-run** (rackbench.history.noise): when the history holds repeated points of the cluster (the same case
  and recipe fingerprint measured in several runs that are not on trial), their pooled spread gives the interval
  of the change between the runs of A and of B. It covers everything that varies between runs of an unchanged
  recipe.
- **Within-run block bootstrap**, when there are no repeats (and always for a share such as the error rate): each
  side's window is cut into blocks of consecutive time, a tenth of the window and BLOCK_MIN_S (10 s) at least (as
  the attainment interval's batch means in time: rackbench.core.stats.batch_size_in_time), and
  the blocks are resampled with replacement (2,000 draws, fixed seed), the statistic recomputed on the requests (or
  5 s slices) of the blocks drawn: the non-overlapping block bootstrap (Carlstein 1986; Künsch 1989, "The jackknife
  and the bootstrap for general stationary observations", Annals of Statistics 17), so that requests correlated in
  time (a slow stretch, a queue that builds) move together. A rate is resampled as 5 s slices, each holding the
  metric's own quantity of the requests that ended in it (output tokens for output tok/s, prompt and output tokens
  for total tok/s); a per-request statistic as the requests sent in the block. Resampling single requests or slices
  gave intervals 3x too narrow against 10-30 s blocks. A side with fewer than MIN_BLOCKS (3) blocks gets no
  interval ("too short"). It covers the window's own variation, not the machine's run-to-run noise, so it can still
  call that noise a change; and a window of a few blocks gives a coarse interval.

A point is *better* or *worse* when the interval of its change excludes no change, else *within noise*; with too
few repeats for run-to-run noise and no records to bootstrap, it says so instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rackbench.core.format import interval, number
from rackbench.history.noise import Noise, change as noise_change
from rackbench.load.records import Request
from rackbench.results import metrics as registry

DRAWS = 2000
BOOTSTRAP_SLICE_S = 5.0
BLOCK_MIN_S = 10.0      # a block of the bootstrap lasts this at least, or a tenth of the window if longer
MIN_BLOCKS = 3          # fewer blocks on a side: no interval ("too short")
BOOTSTRAP = "within-run bootstrap"


@dataclass(frozen=True)
class Change:
    metric: str
    a: float | None
    b: float | None
    rel: float | None          # b / a - 1 (a difference metric: b - a)
    low: float | None          # interval of rel (None without one)
    high: float | None
    verdict: str               # better | worse | within noise | no records | too few repeats | too short
    basis: str = BOOTSTRAP     # or rackbench.history.noise.Noise.describe()

    @property
    def unit(self) -> str:
        """How the change reads (rackbench.core.format)."""
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


def block_s(duration_s: float) -> float:
    """How long a bootstrap block lasts in a window of ``duration_s``."""
    return max(BLOCK_MIN_S, duration_s / 10)


def blocks(metric: registry.Metric, requests: Sequence[Request], duration_s: float) -> list[np.ndarray]:
    """What the bootstrap resamples for ``metric``, in blocks of consecutive time (block_s): runs of 5 s slices of
    its own rate, or the values of the requests sent in each block (a request a statistic does not count, such as a
    failed request's TTFT, is left out). Blocks left empty are dropped."""
    length = block_s(duration_s)
    if metric.bootstrap == "time":
        x = _slices(metric, requests)
        per = max(1, int(round(length / BOOTSTRAP_SLICE_S)))
        return [x[i:i + per] for i in range(0, len(x), per)]
    got = [(q.start_s, v) for q in requests if (v := metric.request(q)) is not None and np.isfinite(v)]
    if not got:
        return []
    if any(t is None for t, _ in got):       # no send times: each request its own block, as if independent
        return [np.array([v], dtype=float) for _, v in got]
    t0 = min(t for t, _ in got)
    by: dict[int, list[float]] = {}
    for t, v in got:
        by.setdefault(int((t - t0) // length), []).append(v)
    return [np.array(by[k], dtype=float) for k in sorted(by)]


def _reduce(metric: registry.Metric, x: np.ndarray, gpus: int) -> float:
    """The metric's statistic of a resample ``x`` (``_reduce_rows`` of one row)."""
    return float(_reduce_rows(metric, x[None, :], gpus)[0])


def _boot(metric: registry.Metric, parts: list[np.ndarray], gpus: int, rng: np.random.Generator) -> np.ndarray:
    """DRAWS resamples of the statistic: each as many blocks as there are, drawn with replacement. Blocks of one
    value each (requests without send times) are drawn as one array, the statistic taken along its rows."""
    idx = rng.integers(0, len(parts), size=(DRAWS, len(parts)))
    if all(len(p) == 1 for p in parts):
        x = np.concatenate(parts)
        return np.concatenate([_reduce_rows(metric, x[idx[i:i + 250]], gpus) for i in range(0, DRAWS, 250)])
    return np.array([_reduce(metric, np.concatenate([parts[j] for j in row]), gpus) for row in idx])


def _reduce_rows(metric: registry.Metric, x: np.ndarray, gpus: int) -> np.ndarray:
    """``_reduce`` of each row of ``x`` (its own copy: the median and percentile partition it in place)."""
    if metric.bootstrap == "time":
        return np.mean(x, axis=-1) / BOOTSTRAP_SLICE_S / (gpus if metric.per_gpu else 1)
    if metric.reduce == "median":
        return np.median(x, axis=-1, overwrite_input=True)
    if metric.reduce == "p99":
        return np.percentile(x, 99, axis=-1, overwrite_input=True)
    return np.mean(x, axis=-1)


def verdict(low: float, high: float, better: str) -> str:
    if low > 0:
        return "better" if better == "higher" else "worse"
    if high < 0:
        return "worse" if better == "higher" else "better"
    return "within noise"


def compare_point(a: dict, b: dict, seed: int = 0, metrics: tuple[str, ...] | None = None,
                  noise: dict[str, Noise | None] | None = None) -> list[Change]:
    """Changes from point ``a`` to point ``b`` (dicts of rackbench.history.rows.point)."""
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
        if got is None or isinstance(got, str):
            out.append(Change(metric.name, ma, mb, rel, None, None, got or (
                "too few repeats" if metric.name in few else "no records")))
        else:
            low, high = got
            out.append(Change(metric.name, ma, mb, rel, low, high, verdict(low, high, metric.better)))
    return out


def _mean(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else float(np.mean(values))


def _bootstrap(metric: registry.Metric, a: Sequence[dict], b: Sequence[dict], rng) -> tuple[float, float] | str | None:
    """The interval of the change by the block bootstrap; None without records, "too short" where a side's windows
    hold fewer than MIN_BLOCKS blocks (a percentile interval over two blocks says nothing)."""
    if metric.bootstrap is None or not all(len(p["requests"]) > 1 and p.get("duration_s") for p in (*a, *b)):
        return None
    sa, sb = ([part for p in group for part in blocks(metric, p["requests"], p["duration_s"]) if len(part)]
              for group in (a, b))
    if not sa or not sb:
        return None
    if len(sa) < MIN_BLOCKS or len(sb) < MIN_BLOCKS:
        return "too short"
    ba, bb = _boot(metric, sa, a[0]["gpus"] or 1, rng), _boot(metric, sb, b[0]["gpus"] or 1, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = bb - ba if metric.change == "difference" else \
            np.where(ba != 0, bb / ba - 1, np.where(bb == 0, 0.0, np.nan))
    ratio = ratio[np.isfinite(ratio)]
    if not len(ratio):
        return None
    low, high = (float(x) for x in np.percentile(ratio, [2.5, 97.5]))
    return low, high
