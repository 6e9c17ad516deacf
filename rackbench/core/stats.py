"""The statistics rackbench's intervals use: quantiles (with scipy's special functions), a sequence's lag-1
autocorrelation and the effective sample sizes it and its batch means in time imply, and the Wilson interval of a
share.

``scipy.stats.t.ppf`` goes through the generic distribution machinery (argument checks, broadcasting): 5-15 ms a
call here, and ``rackbench compare`` asks for one per metric and case. The quantile itself is
``scipy.special.stdtrit``, the inverse of Student's t distribution function that ``t.ppf`` calls in the end
(Cephes' ``stdtri``), so the values are the same; its import does not load scipy.stats either.
"""

import math
from functools import lru_cache


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom (``scipy.stats.t.ppf(p, df)``)."""
    from scipy.special import stdtrit      # here, not at import: every pytest start loads rackbench
    return float(stdtrit(df, p))


@lru_cache(maxsize=256)
def normal_quantile(p: float) -> float:
    """The ``p`` quantile of the standard normal distribution (``scipy.special.ndtri``)."""
    from scipy.special import ndtri        # here, not at import, as t_quantile
    return float(ndtri(p))


def lag1(values) -> float | None:
    """The lag-1 autocorrelation of a sequence (None: fewer than 3 values, or all equal)."""
    import numpy as np
    z = np.asarray(values, dtype=float)
    if len(z) < 3 or z[:-1].std() == 0 or z[1:].std() == 0:     # one side constant: no correlation to speak of
        return None
    rho = float(np.corrcoef(z[:-1], z[1:])[0, 1])
    return rho if math.isfinite(rho) else None


def effective_size(n: int, rho: float | None) -> float:
    """How many independent observations ``n`` positively correlated ones are worth, for the variance of their
    mean, when the correlation decays as an AR(1) process with lag-1 autocorrelation ``rho``:
    n (1 - rho) / (1 + rho) (the variance inflation factor of an AR(1) mean; Bayley & Hammersley 1946; Wilks,
    *Statistical Methods in the Atmospheric Sciences*, 3rd ed., eq. 5.12). A negative or unknown ``rho`` leaves n:
    no credit is taken for anti-correlation."""
    if rho is None or rho <= 0:
        return float(n)
    rho = min(rho, 0.99)
    return n * (1 - rho) / (1 + rho)


def wilson(share: float, n: float, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion ``share`` observed over ``n`` trials (``z``: the normal
    quantile, 1.96 for 95%): E. B. Wilson, "Probable inference, the law of succession, and statistical inference",
    JASA 22 (1927). Unlike the normal (Wald) interval it stays inside [0, 1] and keeps its coverage at shares near
    0 or 1, where an SLO's attainment lives. ``n`` may be an effective (non-integer) size."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


TIME_BATCHES = 10        # batches of equal duration (Schmeiser 1982: 10-30; the fewer, the safer under long swings)
MIN_PER_BATCH = 5        # values per batch on average at least: fewer values, no batch means


def batch_size_in_time(values, mean: float, variance: float, sent_s=None) -> tuple[float, int] | None:
    """The effective size the batch means of a sequence imply, and how many batches it rests on: the sequence cut
    into TIME_BATCHES batches of equal duration by ``sent_s`` (each value's time; without them, batches of equal
    counts, the remainder at the start dropped), empty ones left out; the mean's variance var(batch means) / k, and
    the size ``variance`` / that (``variance``: one value's, p (1 - p) for a 0/1 sequence). A batch lasts a tenth of
    the run, so its length grows with the run (Schmeiser, "Batch size effects in the analysis of simulation
    output", Operations Research 30, 1982). None below TIME_BATCHES x MIN_PER_BATCH values or two batches."""
    import numpy as np
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < TIME_BATCHES * MIN_PER_BATCH:
        return None
    if sent_s is not None and len(sent_s) == n and max(sent_s) > min(sent_s):
        t = np.asarray(sent_s, dtype=float)
        which = np.minimum(((t - t.min()) / (t.max() - t.min()) * TIME_BATCHES).astype(int), TIME_BATCHES - 1)
        counts = np.bincount(which, minlength=TIME_BATCHES)
        means = np.bincount(which, weights=x, minlength=TIME_BATCHES)[counts > 0] / counts[counts > 0]
    else:
        size = n // TIME_BATCHES
        means = x[n - TIME_BATCHES * size:].reshape(TIME_BATCHES, size).mean(axis=1)
    if len(means) < 2:
        return None
    var = float(means.var(ddof=1)) / len(means)
    return (min(float(n), variance / var) if var > 0 else float(n)), len(means)
