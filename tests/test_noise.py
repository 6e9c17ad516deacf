"""rackbench.history.noise: run-to-run noise from repeated points, and the Student-t intervals built on it (pure)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackbench.history import noise
from rackbench.history.noise import Noise, Repeat


def test_repeats_group_one_case_and_fingerprint_with_two_or_more_positive_values():
    rows = [("c1", "f", "r1", 100.0), ("c1", "f", "r2", 110.0), ("c1", "g", "r3", 50.0),   # g: measured once
            ("c4", "f", "r1", 300.0), ("c4", "f", "r2", None), ("c4", "f", "r3", float("nan")),
            ("c2", "f", "r1", 0.0), ("c2", "f", "r2", 20.0)]                               # 0: no successful request
    got = noise.repeats(rows)
    assert [(r.case, r.fingerprint, r.runs, r.values) for r in got] == [("c1", "f", ("r1", "r2"), (100.0, 110.0))]


def test_the_pooled_spread_is_the_log_scale_standard_deviation_over_points():
    a, b = Repeat("a", "f", ("1", "2", "3"), (100.0, 110.0, 90.0)), Repeat("b", "f", ("1", "2"), (400.0, 440.0))
    got = noise.pooled([a, b])
    la, lb = np.log(a.values), np.log(b.values)
    ss = ((la - la.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum()
    assert got.df == 3 and got.points == 2 and got.sd == pytest.approx(math.sqrt(ss / 3))
    assert noise.pooled([b]) is None                       # one degree of freedom: no honest interval


def test_cv_drop_and_the_fixed_tolerance_are_measure_noises_figures():
    r = Repeat("a", "f", ("1", "2", "3"), (249.0, 198.0, 262.0))       # dynamo c2 in the README (rounded values)
    assert r.cv == pytest.approx(0.145, abs=0.003) and r.drop == pytest.approx(1 - 198 / r.mean)
    assert noise.tolerance([r]) == pytest.approx(max(3 * r.cv, r.drop))
    assert noise.tolerance([]) == 0.0


def test_the_interval_is_students_t_on_the_log_ratio():
    n = Noise(sd=0.05, df=8, points=4)
    rel, low, high = noise.change([100.0], [80.0], n)
    half = 2.306 * 0.05 * math.sqrt(2)                     # t(0.975, 8) = 2.306
    assert rel == pytest.approx(-0.2)
    assert low == pytest.approx(0.8 * math.exp(-half) - 1, abs=1e-3) and high == pytest.approx(0.8 * math.exp(half) - 1, abs=1e-3)
    assert n.band(3, 1) < n.band(1, 1)                     # more repeats, a narrower interval


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1, 1e5), min_size=1, max_size=5), st.floats(0.001, 1), st.integers(2, 40))
def test_a_group_against_itself_is_centred_on_no_change(values, sd, df):
    rel, low, high = noise.change(values, values, Noise(sd, df, 1))
    assert rel == pytest.approx(0, abs=1e-9) and low < 0 < high and (1 + low) * (1 + high) == pytest.approx(1)


def test_noise_alone_rarely_crosses_the_interval():
    """Simulated runs of an unchanged point with 8% log noise: pooled from 4 points x 3 runs, single runs compared
    pairwise fall outside the 95% interval about 5% of the time, not more."""
    rng = np.random.default_rng(0)
    outside = trials = 0
    for _ in range(400):
        values = np.exp(rng.normal(np.log(300), 0.08, size=(4, 3)))
        n = noise.pooled([Repeat(f"c{i}", "f", ("1", "2", "3"), tuple(v)) for i, v in enumerate(values)])
        a, b = np.exp(rng.normal(np.log(300), 0.08, size=2))
        _, low, high = noise.change([a], [b], n)
        outside += not (low <= 0 <= high)
        trials += 1
    assert outside / trials < 0.09


@pytest.mark.parametrize("n, p, confidence", [(459, 0.99, 0.99), (460, 0.99, 0.99), (600, 0.99, 0.99),
                                              (50, 0.5, 0.95), (300, 0.9, 0.99), (200, 0.99, 0.8)])
def test_the_quantile_bound_is_the_order_statistic_the_exact_binomial_gives(n, p, confidence):
    """The upper bound of the p-quantile is the k-th smallest value, k the smallest with P(Binom(n, p) <= k - 1) >=
    confidence (the distribution-free order-statistic bound), checked against the CDF summed exactly in rationals."""
    from fractions import Fraction
    from rackbench.load.steady import needed, quantile_upper
    values = [float(i) for i in range(n)]                 # the k-th smallest is k - 1
    if n < needed(p, confidence):
        assert quantile_upper(values, p, confidence) is None
        return
    q, cdf, k = Fraction(p).limit_denominator(10**6), Fraction(0), 0
    while cdf < Fraction(confidence).limit_denominator(10**6):
        cdf += math.comb(n, k) * q ** k * (1 - q) ** (n - k)
        k += 1
    assert quantile_upper(values, p, confidence) == min(k, n) - 1
