"""#53 item 6: benchmarks/search_errors.py scores the search out of sample, on recordings made after its rule was
frozen (tests/data/search-oos-cpu): error rates outside an indifference zone, n = independent recordings, and the
GPU-time of each search with its probes' start-up counted."""

import importlib.util
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
spec = importlib.util.spec_from_file_location("search_errors", REPO / "benchmarks/search_errors.py")
search_errors = importlib.util.module_from_spec(spec)
sys.modules["search_errors"] = search_errors
spec.loader.exec_module(search_errors)

DATA = REPO / "tests/data/search-oos-cpu"


@pytest.mark.parametrize("answer, truths, verdict", [
    (24, {16: 0.95, 24: 0.82, 32: 0.40}, (False, False)),        # c24 in the zone, c32 clearly missed
    (32, {16: 0.95, 24: 0.82, 32: 0.40}, (True, False)),         # answered a concurrency clearly not met
    (16, {16: 0.95, 24: 0.90, 32: 0.40}, (False, True)),         # c24 clearly met, and stopped below it
    (16, {16: 0.95, 24: 0.84, 32: 0.40}, (False, False)),        # c24 met, but inside the zone: either is right
    (None, {16: 0.90, 24: 0.50, 32: 0.20}, (False, True)),       # none, though the lowest is clearly met
    (None, {16: 0.83, 24: 0.50, 32: 0.20}, (False, False)),      # none, the lowest inside the zone
    (16, {16: 0.95, 24: 0.78, 32: 0.90}, (False, False)),        # the next one not met: a higher one does not count
])
def test_an_answer_is_wrong_only_outside_the_indifference_zone(answer, truths, verdict):
    assert search_errors.wrong(answer, truths, 0.8, 0.05) == verdict


def test_the_recordings_are_scored_by_independent_recording_with_the_probes_start_up_counted():
    got = search_errors.score(DATA, "search", search_errors.TIERS["search"], search_errors.RULES["shipped"](30.0),
                              30.0, 0.05)
    assert [s.recording for s in got] == [f"r-rep{n}" for n in range(1, 6)]
    for s in got:
        assert sorted(s.truth) == [16, 24, 32] and all(0 <= a <= 1 for a in s.truth.values())
        assert s.gpu_s > 30                                    # at least one 30 s probe, and its start-up
        assert s.grid_gpu_s > 3 * 120                          # three points of 120 s, and their start-ups
    points = search_errors.grid([DATA / "r-rep1"], "search", search_errors.TIERS["search"])
    assert all(5 < p.startup_s < 120 for p in points)          # each point's start to its first profiled request
