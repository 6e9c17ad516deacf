"""The counters' series the stopping rule and the steady-state analysis read (rackbench.load.series): each scrape
stamped when its answer came, no burst of scrapes after a late one, and the rates on a regular grid. The CI run of
2026-12-05 (ed5a632): the live adaptive point's 95% interval was ±102% at 49 s and ±36% at its 120 s cap, so it never
stopped. vLLM's CPU server answers scrapes up to 5 s late; stamped at the request and caught up by back-to-back
scrapes, the rate per pair of scrapes is one slice of several times the mean and a run of empty ones."""

import importlib.util
import random
import threading
import time

from rackbench.load.series import CounterSampler, Sample, token_rates
from rackbench.server.counters import Snapshot
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("series_stamps", REPO / "benchmarks/series_stamps.py")
series_stamps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(series_stamps)


def samples(points):
    return [Sample(t, Snapshot(generation_tokens=g)) for t, g in points]


def test_regular_scrapes_give_each_slices_own_rate():
    rng, tokens, got = random.Random(3), 0.0, []
    for i in range(40):
        got.append((i * 0.5, tokens))
        tokens += rng.randrange(0, 200)
    rates = token_rates(samples(got), 0.5)
    assert rates == [(b - a) / 0.5 for (_, a), (_, b) in zip(got, got[1:])]


def test_a_late_answer_shares_its_tokens_out_over_the_slices_it_spanned():
    # 100 tok/s throughout; the scrape sent at 1.0 s was answered at 3.0 s, with every token counted until then
    late = samples([(0.0, 0), (0.5, 50), (1.0, 100), (3.0, 300), (3.1, 310), (3.5, 350), (4.0, 400)])
    assert token_rates(late, 0.5) == [100.0] * 8
    # counted in bursts (a whole round of requests at once), late or not: each burst spread over the time it took
    bursty = samples([(0.0, 0), (1.0, 0), (2.0, 512), (2.25, 512), (3.0, 512), (4.0, 1024)])
    rates = token_rates(bursty, 0.5)
    assert len(rates) == 8 and sum(rates) * 0.5 == 1024                  # every token, each in the time it spanned
    assert max(rates) == 512.0 and min(rates) == 0.0
    assert token_rates(samples([(1.0, 5)]), 0.5) == [] and token_rates(samples([(1.0, 5), (1.0, 9)]), 0.5) == []


class SlowServer:
    """Counters that answer the third scrape late (a busy CPU server); each call's start kept."""

    def __init__(self, late_s: float):
        self.late_s, self.calls, self.tokens = late_s, [], 0.0
        self.lock = threading.Lock()

    def counters(self, client=None) -> Snapshot:
        with self.lock:
            self.calls.append(time.monotonic())
            n = len(self.calls)
        if n == 3:
            time.sleep(self.late_s)
        self.tokens += 10
        return Snapshot(generation_tokens=self.tokens)


def test_the_sampler_stamps_the_answer_and_skips_the_ticks_a_late_one_overran():
    slow = SlowServer(late_s=0.45)
    sampler = CounterSampler(slow, slice_s=0.1).start()
    time.sleep(1.2)
    elapsed = time.monotonic() - sampler.t0
    got = sampler.stop()
    calls = [c - sampler.t0 for c in slow.calls]
    assert got[2].t >= calls[2] + 0.45                       # the late scrape is stamped when it answered
    ticks = [int(c / 0.1) for c in calls[1:-1]]              # the loop's scrapes (not start's or stop's own)
    assert len(ticks) == len(set(ticks)), calls              # one scrape per tick at most: no catch-up burst
    assert len(ticks) <= int(elapsed / 0.1) - 4 + 1, calls   # the four ticks it overran were not scraped later


def test_on_a_recorded_cpu_points_scrapes_the_grid_knows_the_rate_within_a_third_of_the_interval():
    """tests/data/scrapes-cpu: the scrapes of one adaptive CPU point, each with both of its times. At 60, 90 and
    120 s the interval from the answer-stamped grid is under a third of the one from request stamps and a rate per
    scrape (benchmarks/series_stamps.py prints them: ±12% against ±49% at 60 s), and stationary both ways."""
    rows = series_stamps.read(series_stamps.DEFAULT)
    for end, ref, ours in series_stamps.intervals(rows, 0.5):
        assert ours.half_width_rel < ref.half_width_rel / 3, (end, ref, ours)
        assert ours.stationary and ref.stationary and ours.batches >= 16, (end, ours)
