"""Compare two measurements of the same point with a confidence interval (pure: no I/O).

Each point's records are resampled with replacement (bootstrap, 2,000 draws, fixed seed) and the statistic
recomputed. Throughput is a rate, so it is resampled by time: the window is cut into 5 s slices of completed
output tokens and the slices are resampled (output tok/s per GPU = tokens of the drawn slices / their time / GPUs).
Per-request statistics resample requests: tok/s per user p50 ((output tokens - 1) / (latency - TTFT)), TTFT p50
and p99, error rate. The change B vs A is reported with the
2.5-97.5 percentile interval of its bootstrap distribution; a point is *better* or *worse* when that interval
excludes no change, else *within noise*.

What it assumes: requests of one run are exchangeable draws from that run's conditions, so the interval covers the
noise *within* a run (which requests landed in the window). Run-to-run noise of the machine (other tenants, thermal
state, a different placement) is not in it; with repeats of the same recipe fingerprint in the history, compare
those repeats to see it (README: Results history).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

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


METRICS: dict[str, tuple[bool, Callable[[np.ndarray, float, int], float]]] = {}   # name -> (higher is better, stat)


def _metric(name: str, higher_better: bool):
    def register(fn):
        METRICS[name] = (higher_better, fn)
        return fn
    return register


@_metric("output_tps_per_gpu", True)
def _tps(slices: np.ndarray, duration: float, gpus: int) -> float:
    return float(np.mean(slices) / SLICE_S / gpus)


def _slices(rows: np.ndarray) -> np.ndarray:
    """Successful output tokens completed in each SLICE_S of the window (by request end)."""
    ends = rows[:, 4]
    ok = np.isfinite(ends) & (rows[:, 3] == 1)
    if ok.sum() < 2:
        return np.zeros(0)
    edges = np.arange(ends[ok].min(), ends[ok].max() + SLICE_S, SLICE_S)
    counts, _ = np.histogram(ends[ok], bins=edges, weights=rows[ok, 0])
    return counts

@_metric("tps_per_user_p50", True)
def _per_user(rows: np.ndarray, duration: float, gpus: int) -> float:
    ok = rows[(rows[:, 3] == 1) & (rows[:, 1] > rows[:, 2])]
    return float(np.median((ok[:, 0] - 1) / (ok[:, 1] - ok[:, 2]) * 1000)) if len(ok) else float("nan")


@_metric("ttft_p50_ms", False)
def _ttft50(rows: np.ndarray, duration: float, gpus: int) -> float:
    ok = rows[rows[:, 3] == 1]
    return float(np.percentile(ok[:, 2], 50)) if len(ok) else float("nan")


@_metric("ttft_p99_ms", False)
def _ttft99(rows: np.ndarray, duration: float, gpus: int) -> float:
    ok = rows[rows[:, 3] == 1]
    return float(np.percentile(ok[:, 2], 99)) if len(ok) else float("nan")


@_metric("error_rate", False)
def _errors(rows: np.ndarray, duration: float, gpus: int) -> float:
    return float(1 - np.mean(rows[:, 3]))


def _array(rows: Sequence[Row]) -> np.ndarray:
    nan = lambda x: np.nan if x is None else x  # noqa: E731
    return np.array([[r[0] or 0.0, nan(r[1]), nan(r[2]), r[3], nan(r[4] if len(r) > 4 else None)] for r in rows],
                    dtype=float).reshape(-1, 5)


def _boot(rows: np.ndarray, stat, duration: float, gpus: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(rows), size=(DRAWS, len(rows)))
    return np.array([stat(rows[i], duration, gpus) for i in idx])


def _verdict(low: float, high: float, higher_better: bool) -> str:
    if low > 0:
        return "better" if higher_better else "worse"
    if high < 0:
        return "worse" if higher_better else "better"
    return "within noise"


def compare_point(a: dict, b: dict, seed: int = 0, metrics: tuple[str, ...] | None = None) -> list[Change]:
    """Changes from point ``a`` to point ``b`` (dicts of servebench.history.point) of ``metrics`` (default: all)."""
    rng = np.random.default_rng(seed)
    out = []
    ra, rb = _array(a["requests"]), _array(b["requests"])
    for name, (higher_better, stat) in METRICS.items():
        if metrics is not None and name not in metrics:
            continue
        va, vb = a.get(name), b.get(name)
        absolute = name == "error_rate"
        if absolute:
            rel = (vb - va) if va is not None and vb is not None else None
        else:
            rel = (vb / va - 1) if va and vb is not None else None
        usable = len(ra) > 1 and len(rb) > 1 and a.get("duration_s") and b.get("duration_s")
        if not usable:
            out.append(Change(name, va, vb, rel, None, None, "no records"))
            continue
        sa, sb = (_slices(ra), _slices(rb)) if name == "output_tps_per_gpu" else (ra, rb)
        if len(sa) < 2 or len(sb) < 2:
            out.append(Change(name, va, vb, rel, None, None, "no records"))
            continue
        ba = _boot(sa, stat, a["duration_s"], a["gpus"] or 1, rng)
        bb = _boot(sb, stat, b["duration_s"], b["gpus"] or 1, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = bb - ba if absolute else np.where(ba != 0, bb / ba - 1, np.where(bb == 0, 0.0, np.nan))
        ratio = ratio[np.isfinite(ratio)]
        if not len(ratio):
            out.append(Change(name, va, vb, rel, None, None, "no records"))
            continue
        low, high = (float(x) for x in np.percentile(ratio, [2.5, 97.5]))
        out.append(Change(name, va, vb, rel, low, high, _verdict(low, high, higher_better)))
    return out
