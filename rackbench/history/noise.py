"""Run-to-run noise, measured from repeated points, and the intervals that include it (pure: no I/O).

A *repeat* is one point (case) measured in several runs with the same recipe fingerprint: nothing the suite
controls changed between them, so their spread is the machine's noise (other tenants, placement, thermal state,
which requests landed in the window). The spread is taken on the log scale (a relative spread: a point at 400
tok/s and one at 40 are equally noisy at 10%), and pooled over every repeated point of one cluster: with three runs
a single point has 2 degrees of freedom, the cluster's points together have many. What pooling assumes: the
relative run-to-run noise is about the same at every point of one cluster (``rackbench history noise`` prints each
point's own spread, to check).

A change between groups of runs A and B (each one run or several) is then mean(ln B) - mean(ln A), with the
Student-t interval sd * t(df) * sqrt(1/nA + 1/nB): the two-sided 95% interval of a difference of two means of
independent normal draws with a common spread (Welch is not needed: the spread is the pooled one).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

from rackbench.core.stats import t_quantile

LEVEL = 0.95
MIN_DF = 2        # fewer degrees of freedom give no honest interval


@dataclass(frozen=True)
class Repeat:
    """One point measured in several runs with one recipe fingerprint."""
    case: str
    fingerprint: str
    runs: tuple[str, ...]
    values: tuple[float, ...]      # the metric in each run, in the order of ``runs``

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def cv(self) -> float:
        """Coefficient of variation (sample standard deviation / mean)."""
        return statistics.stdev(self.values) / self.mean

    @property
    def drop(self) -> float:
        """The largest drop below the mean, as a fraction of it."""
        return 1 - min(self.values) / self.mean


@dataclass(frozen=True)
class Noise:
    """The run-to-run spread of one metric on one cluster."""
    sd: float          # pooled standard deviation of ln(metric) between runs of the same point
    df: int            # its degrees of freedom: sum over repeated points of (runs - 1)
    points: int        # how many repeated points it pools
    runs: int = 0      # how many point measurements (repeats) it rests on

    def band(self, n_a: int = 1, n_b: int = 1) -> float:
        """Half-width on the log scale of the interval of a change between means of n_a and n_b runs."""
        return t_quantile(0.5 + LEVEL / 2, self.df) * self.sd * math.sqrt(1 / n_a + 1 / n_b)

    def describe(self) -> str:
        return (f"run-to-run noise pooled over {self.points} repeated point(s), {self.runs} repeats, "
                f"{self.df} df")


def repeats(rows: Iterable[tuple[str, str, str, float | None]]) -> list[Repeat]:
    """Repeated points from (case, fingerprint, run, value) rows: groups of two or more positive values."""
    groups: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for case, fingerprint, run, value in rows:
        if value is not None and math.isfinite(value) and value > 0:
            groups.setdefault((case, fingerprint), []).append((run, value))
    return [Repeat(case, fp, tuple(r for r, _ in got), tuple(v for _, v in got))
            for (case, fp), got in sorted(groups.items()) if len(got) >= 2]


def pooled(reps: Iterable[Repeat]) -> Noise | None:
    """The pooled log-scale spread of repeated points; None below 2 degrees of freedom (no interval is honest)."""
    ss, df, points, runs = 0.0, 0, 0, 0
    for r in reps:
        logs = [math.log(v) for v in r.values]
        m = statistics.fmean(logs)
        ss += sum((x - m) ** 2 for x in logs)
        df += len(logs) - 1
        points += 1
        runs += len(logs)
    return Noise(math.sqrt(ss / df), df, points, runs) if df >= MIN_DF else None


def change(a: Sequence[float], b: Sequence[float], noise: Noise) -> tuple[float, float, float]:
    """(relative change of B against A, low, high): ratio of geometric means - 1 and its 95% interval."""
    diff = statistics.fmean(math.log(x) for x in b) - statistics.fmean(math.log(x) for x in a)
    half = noise.band(len(a), len(b))
    return math.expm1(diff), math.expm1(diff - half), math.expm1(diff + half)


def tolerance(reps: Iterable[Repeat]) -> float:
    """A fixed baseline tolerance that noise alone would not cross: max(3 x CV, largest drop) over points."""
    return max((max(3 * r.cv, r.drop) for r in reps), default=0.0)
