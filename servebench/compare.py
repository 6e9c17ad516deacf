"""Compare measurements of the same point, A against B, with a 95% interval and a verdict (pure: no I/O).

Two sources of confidence, the better one first:

- **Run-to-run** (servebench.noise): when the history holds repeated points of the cluster (the same case and
  recipe fingerprint measured in several runs), their pooled spread gives the interval of the change between
  the runs of A and of B. It covers everything that varies between runs of an unchanged recipe.
- **Within-run bootstrap**, when there are no repeats (and always for the error rate): each side's records are
  resampled with replacement (2,000 draws, fixed seed) and the statistic recomputed. Throughput is a rate, so it
  is resampled by time: the window is cut into 5 s slices of completed output tokens and the slices are
  resampled. Per-request statistics resample requests: tok/s per user p50 ((output tokens - 1) / (latency -
  TTFT)), TTFT p50 and p99, error rate. It assumes the requests of one run are exchangeable draws from that run's
  conditions: it covers which requests landed in the window, not the machine's run-to-run noise, so it can call
  a change that noise alone makes "better" or "worse" (scripts/measure-noise shows by how much).

A point is *better* or *worse* when the interval of its change excludes no change, else *within noise*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .noise import Noise, change as noise_change

DRAWS = 2000
SLICE_S = 5.0
Row = tuple   # output tokens, latency ms, TTFT ms, ok, end s


@dataclass(frozen=True)
class Change:
    metric: str
    a: float | None
    b: float | None
    rel: float | None          # b / a - 1 (error_rate: b - a, in points of rate)
    low: float | None          # interval of rel (None without records)
    high: float | None
    verdict: str               # better | worse | within noise | no records
    basis: str = "within-run bootstrap"   # or servebench.noise.Noise.describe()


# name -> (higher is better, per-item values, reduction over the items of each draw). The items are what the
# bootstrap resamples: 5 s slices of output tokens for throughput, requests for the rest; an item that is nan
# (a failed request's TTFT, say) does not count for that statistic and is not resampled.
Stat = tuple[bool, Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray, int], np.ndarray]]
METRICS: dict[str, Stat] = {}


def _metric(name: str, higher_better: bool, reduce: Callable[[np.ndarray, int], np.ndarray]):
    def register(items):
        METRICS[name] = (higher_better, items, reduce)
        return items
    return register


@_metric("output_tps_per_gpu", True, lambda x, gpus: np.mean(x, axis=-1) / SLICE_S / gpus)
def _slices(rows: np.ndarray) -> np.ndarray:
    """Successful output tokens completed in each SLICE_S of the window (by request end)."""
    ends = rows[:, 4]
    ok = np.isfinite(ends) & (rows[:, 3] == 1)
    if ok.sum() < 2:
        return np.zeros(0)
    edges = np.arange(ends[ok].min(), ends[ok].max() + SLICE_S, SLICE_S)
    counts, _ = np.histogram(ends[ok], bins=edges, weights=rows[ok, 0])
    return counts


@_metric("tps_per_user_p50", True, lambda x, gpus: np.median(x, axis=-1))
def _per_user(rows: np.ndarray) -> np.ndarray:
    ok = (rows[:, 3] == 1) & (rows[:, 1] > rows[:, 2])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, (rows[:, 0] - 1) / (rows[:, 1] - rows[:, 2]) * 1000, np.nan)


def _ttft(rows: np.ndarray) -> np.ndarray:
    return np.where(rows[:, 3] == 1, rows[:, 2], np.nan)


_metric("ttft_p50_ms", False, lambda x, gpus: np.percentile(x, 50, axis=-1))(_ttft)
_metric("ttft_p99_ms", False, lambda x, gpus: np.percentile(x, 99, axis=-1))(_ttft)


@_metric("error_rate", False, lambda x, gpus: np.mean(x, axis=-1))
def _errors(rows: np.ndarray) -> np.ndarray:
    return 1.0 - rows[:, 3]


def _array(rows: Sequence[Row]) -> np.ndarray:
    nan = lambda x: np.nan if x is None else x  # noqa: E731
    return np.array([[r[0] or 0.0, nan(r[1]), nan(r[2]), r[3], nan(r[4] if len(r) > 4 else None)] for r in rows],
                    dtype=float).reshape(-1, 5)


CHUNK = 250     # draws resampled at once: bounds the memory of a point with many requests


def _boot(items: np.ndarray, reduce, gpus: int, rng: np.random.Generator) -> np.ndarray:
    """The statistic over DRAWS resamples (with replacement) of the items, vectorized."""
    idx = rng.integers(0, len(items), size=(DRAWS, len(items)))
    return np.concatenate([reduce(items[idx[i:i + CHUNK]], gpus) for i in range(0, DRAWS, CHUNK)])


def _verdict(low: float, high: float, higher_better: bool) -> str:
    if low > 0:
        return "better" if higher_better else "worse"
    if high < 0:
        return "worse" if higher_better else "better"
    return "within noise"


def compare_point(a: dict, b: dict, seed: int = 0, metrics: tuple[str, ...] | None = None,
                  noise: dict[str, Noise | None] | None = None) -> list[Change]:
    """Changes from point ``a`` to point ``b`` (dicts of servebench.history.point) of ``metrics`` (default: all)."""
    return compare_groups([a], [b], seed, metrics, noise)


def compare_groups(a: Sequence[dict], b: Sequence[dict], seed: int = 0, metrics: tuple[str, ...] | None = None,
                   noise: dict[str, Noise | None] | None = None) -> list[Change]:
    """Changes from the runs ``a`` of a point to its runs ``b`` (each a list of servebench.history.point dicts),
    with the run-to-run ``noise`` of each metric where the history has it, else by bootstrap."""
    rng = np.random.default_rng(seed)
    out = []
    for name, (higher_better, items, reduce) in METRICS.items():
        if metrics is not None and name not in metrics:
            continue
        va, vb = [p.get(name) for p in a], [p.get(name) for p in b]
        ma, mb = _mean(va), _mean(vb)
        rel = _rel(name, ma, mb)
        known = (noise or {}).get(name)
        if known is not None and all(v is not None and v > 0 for v in va + vb):
            rel, low, high = noise_change(va, vb, known)
            out.append(Change(name, ma, mb, rel, low, high, _verdict(low, high, higher_better), known.describe()))
            continue
        out.append(_bootstrap(name, a, b, ma, mb, rel, items, reduce, higher_better, rng))
    return out


def _mean(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else float(np.mean(values))


def _rel(name: str, va: float | None, vb: float | None) -> float | None:
    if name == "error_rate":
        return (vb - va) if va is not None and vb is not None else None
    return (vb / va - 1) if va and vb is not None else None


def _bootstrap(name, a, b, ma, mb, rel, items, reduce, higher_better, rng) -> Change:
    none = Change(name, ma, mb, rel, None, None, "no records")
    if not all(len(p["requests"]) > 1 and p.get("duration_s") for p in (*a, *b)):
        return none
    sides = [np.concatenate([items(_array(p["requests"])) for p in group]) for group in (a, b)]
    sa, sb = (x[np.isfinite(x)] for x in sides)
    ga, gb = a[0]["gpus"] or 1, b[0]["gpus"] or 1
    if len(sa) < 2 or len(sb) < 2:
        return none
    ba, bb = _boot(sa, reduce, ga, rng), _boot(sb, reduce, gb, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = bb - ba if name == "error_rate" else np.where(ba != 0, bb / ba - 1, np.where(bb == 0, 0.0, np.nan))
    ratio = ratio[np.isfinite(ratio)]
    if not len(ratio):
        return none
    low, high = (float(x) for x in np.percentile(ratio, [2.5, 97.5]))
    return Change(name, ma, mb, rel, low, high, _verdict(low, high, higher_better))
