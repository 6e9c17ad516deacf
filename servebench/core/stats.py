"""Quantiles of the distributions servebench's intervals use, with scipy's special functions.

``scipy.stats.t.ppf`` goes through the generic distribution machinery (argument checks, broadcasting): 5-15 ms a
call here, and ``servebench compare`` asks for one per metric and case. The quantile itself is
``scipy.special.stdtrit``, the inverse of Student's t distribution function that ``t.ppf`` calls in the end
(Cephes' ``stdtri``), so the values are the same; its import does not load scipy.stats either.
"""

from functools import lru_cache


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom (``scipy.stats.t.ppf(p, df)``)."""
    from scipy.special import stdtrit      # here, not at import: every pytest start loads servebench
    return float(stdtrit(df, p))
