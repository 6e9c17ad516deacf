"""Is a point's series in steady state, and how precise is its mean? (pure: no I/O)

The series is a rate per slice (output tokens per second in each ``slice_s``). Methods, as published:

* **Warm-up truncation: MSER-5** (White 1997; White, Cobb and Spratt 2000). Batch the series in means of 5 slices,
  Z_1..Z_k; for each candidate truncation d (the first d batches dropped, d <= k/2) the statistic is
  MSER(d) = sum_{j>d} (Z_j - mean_{j>d} Z)^2 / (k - d)^2; the truncation is the d that minimises it.
* **Stationarity: Heidelberger-Welch** (Heidelberger and Welch 1983), the Cramér-von Mises test on the
  standardised bridge of the batch means after truncation: with S_j the partial sums of (Z - mean),
  B(j/n) = S_j / (sqrt(n) * sigma), statistic W = (1/n) sum_j B(j/n)^2, whose limiting distribution is the
  Cramér-von Mises one (Anderson and Darling 1952; its CDF by the series of Csörgő and Faraway 1996). sigma^2 is
  estimated from the batch means, which the batching makes nearly independent (Law's batch-means method: batches of
  at least 5 slices; the lag-1 autocorrelation of the batch means is reported beside it). Stationary when p >= alpha.
* **Batch size** for what follows: starting at 5 slices, doubled while the lag-1 autocorrelation of the batch means
  exceeds 0.2 and at least 2 x MIN_BATCHES batches remain (Law and Carson's sequential batch-size rule, 1979), so the
  batch means are nearly independent.
* **Precision**: the 95% confidence interval of the mean on those batch means after truncation, Student's t with k-1
  degrees of freedom: half-width = t * s / sqrt(k); relative = half-width / mean.
* **Drift**: the least-squares slope of the batch means after truncation, per minute, relative to the mean.
* **Percentile evidence** (the order-statistic bound that MLPerf LoadGen's early stopping uses): with n values, the
  p-quantile is below the k-th smallest with confidence c when P(Binomial(n, p) <= k - 1) >= c; the smallest such k
  gives the upper bound. n must be at least log(1 - c) / log(p) for any bound to exist (459 for p99 at 99%).
  That count assumes independent values; a replay's are not (a slow stretch makes many slow requests in a row). With
  the values' send times the bound rests on an effective size instead (Woodruff's method: the quantile's interval
  from the interval of the share below it, that share's variance taken from the design; Woodruff 1952, "Confidence
  intervals for medians and other position measures", JASA 47): the share of values above the estimated p-quantile,
  its effective size n_e the smaller of its AR(1) size and that of its batch means in time
  (rackbench.core.stats.batch_size_in_time), times (z / t_{k-1})^2 at the bound's confidence for the k batch means
  the variance rests on (Korn and Graubard 1998, as rackbench.results.slo); the bound is the value at rank
  ceil(n k_e / n_e), k_e the bound's rank among n_e independent values. Fewer than 459 effective values: no bound
  (a 120 s window seldom has them: benchmarks/interval_coverage.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rackbench.core.stats import batch_size_in_time, effective_size, lag1, normal_quantile, t_quantile

if TYPE_CHECKING:      # numpy is imported where a series is analysed: every pytest start loads this module
    import numpy as np

BATCH = 5                  # MSER-5: batch means of 5 slices
ALPHA = 0.05
MIN_BATCHES = 8            # fewer batches after truncation: nothing is claimed


@dataclass(frozen=True)
class Steady:
    slice_s: float
    batch_size: int            # slices per batch
    batches: int               # after truncation
    truncated_s: float         # the warm-up MSER-5 found
    mean: float | None         # the rate's mean after truncation
    half_width_rel: float | None
    statistic: float | None    # Heidelberger-Welch's Cramér-von Mises W
    p_value: float | None
    stationary: bool | None    # None: too few batches to say
    drift_per_min_rel: float | None
    lag1: float | None         # lag-1 autocorrelation of the batch means (near 0: the batches are independent)

    def as_dict(self) -> dict:
        return {"method": "MSER-5 truncation; Heidelberger-Welch Cramér-von Mises test on batch means",
                **self.__dict__}


def batch_means(series: np.ndarray, size: int = BATCH) -> np.ndarray:
    import numpy as np
    k = len(series) // size
    return series[:k * size].reshape(k, size).mean(axis=1) if k else np.zeros(0)


def mser(z: np.ndarray) -> int:
    """The MSER truncation (in batches) of batch means ``z``: the d <= k/2 that minimises the statistic."""
    k = len(z)
    if k < 2:
        return 0
    best, best_d = math.inf, 0
    for d in range(0, k // 2 + 1):
        rest = z[d:]
        value = float(((rest - rest.mean()) ** 2).sum() / (k - d) ** 2)
        if value < best:
            best, best_d = value, d
    return best_d


def cvm_cdf(x: float, tolerance: float = 1e-9) -> float:
    """The limiting Cramér-von Mises CDF (Csörgő and Faraway 1996, eq. 1.2): a series of positive terms, summed
    until a term is negligible (accurate below x ~ 4, where the CDF is already within 1e-6 of 1)."""
    if x <= 0:
        return 0.0
    from scipy import special          # imported when a point is analysed, not at every pytest start (~1.7 s)
    total, k = 0.0, 0
    while True:
        y = (4 * k + 1) ** 2 / (16 * x)
        term = math.exp(special.gammaln(k + 0.5) - special.gammaln(k + 1)) * math.sqrt(4 * k + 1) \
            * math.exp(-y) * special.kv(0.25, y) / (math.pi ** 1.5 * math.sqrt(x))
        total += term
        k += 1
        if abs(term) < tolerance or k > 200:
            return float(min(1.0, max(0.0, total)))


def hw_test(z: np.ndarray) -> tuple[float, float] | None:
    """(W, p-value) of the Heidelberger-Welch test on batch means ``z`` (None with fewer than MIN_BATCHES)."""
    import numpy as np
    n = len(z)
    if n < MIN_BATCHES:
        return None
    sd = float(z.std(ddof=1))
    if sd == 0:
        return 0.0, 1.0
    bridge = np.cumsum(z - z.mean()) / (math.sqrt(n) * sd)
    w = float((bridge ** 2).sum() / n)
    return w, 1.0 - cvm_cdf(w)


def batch_size(x: np.ndarray, start: int = BATCH, max_lag1: float = 0.2) -> int:
    """Slices per batch: doubled from ``start`` while the batch means' lag-1 autocorrelation exceeds ``max_lag1`` and
    at least 2 x MIN_BATCHES batches would remain."""
    b = start
    while len(x) // (2 * b) >= 2 * MIN_BATCHES:
        lag = lag1(batch_means(x, b))
        if lag is None or lag <= max_lag1:
            break
        b *= 2
    return b


def trim(x: np.ndarray) -> np.ndarray:
    """The series from its first non-zero slice to its last (before the generator sent anything, and after it
    stopped, the server is idle, not in any state of the run)."""
    import numpy as np
    nz = np.flatnonzero(x)
    return x[nz[0]:nz[-1] + 1] if len(nz) else x[:0]


def analyse(series: list[float] | np.ndarray, slice_s: float, alpha: float = ALPHA) -> Steady:
    """The steady-state analysis of a rate series (one value per slice; idle slices at either end left out)."""
    import numpy as np
    x = np.asarray(series, dtype=float)
    x = trim(x[np.isfinite(x)])
    d = mser(batch_means(x)) * BATCH
    b = batch_size(x[d:])
    rest = batch_means(x[d:], b)
    k = len(rest)
    mean = float(rest.mean()) if k else None
    half = rel = drift = rho = None
    if k >= 2 and mean:
        half = t_quantile(0.975, k - 1) * float(rest.std(ddof=1)) / math.sqrt(k)
        rel = half / abs(mean)
        minutes = np.arange(k) * b * slice_s / 60
        drift = float(np.polyfit(minutes, rest, 1)[0] / mean) if k >= 3 else None
        rho = lag1(rest)
    test = hw_test(rest)
    return Steady(slice_s, b, k, d * slice_s, mean, rel, test[0] if test else None,
                  test[1] if test else None, (test[1] >= alpha) if test else None, drift, rho)


def needed(p: float, confidence: float) -> int:
    """The fewest values for which an upper bound of the p-quantile at ``confidence`` exists."""
    return math.ceil(math.log(1 - confidence) / math.log(p))


def quantile_upper(values: list[float], p: float = 0.99, confidence: float = 0.99,
                   sent_s: list[float] | None = None) -> float | None:
    """The order-statistic upper bound of the p-quantile at ``confidence`` (None with too few values); with
    ``sent_s`` (each value's send time, in the values' order) on the effective size of the share above it."""
    import numpy as np
    keep = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    xs = sorted(values[i] for i in keep)
    n = len(xs)
    if n < needed(p, confidence):
        return None
    size = float(n)
    if sent_s is not None:
        order = sorted(keep, key=lambda i: sent_s[i])
        estimate = float(np.percentile(xs, 100 * p))
        above = [values[i] > estimate for i in order]
        share = sum(above) / n
        if 0 < share < 1:
            by_batches = batch_size_in_time(above, share, share * (1 - share), [sent_s[i] for i in order])
            size = min(effective_size(n, lag1(above)), by_batches[0] if by_batches else float(n))
            if by_batches:      # Korn and Graubard's degrees-of-freedom adjustment: n_e (z / t_{k-1})^2
                size *= (normal_quantile(confidence) / t_quantile(confidence, by_batches[1] - 1)) ** 2
    m = math.floor(size)
    if m < needed(p, confidence):
        return None
    from scipy.special import bdtr       # the binomial CDF; scipy.stats costs ~1 s to import, this does not
    cdf = bdtr(np.arange(m + 1), m, p)
    k = int(np.argmax(cdf >= confidence)) + 1        # smallest k with P(Binom(m, p) <= k - 1) >= c
    rank = k if m == n else math.ceil(n * k / m)
    return xs[min(rank, n) - 1]
