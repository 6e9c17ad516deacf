"""The adaptive stopping rule replayed on recorded full-length points (tests/data/long-cpu: four 320 s points of the
embedded default with their series), as README's Run length section reports: the default rule never stops one of
them on an estimate outside the full run's 95% interval, and a loose target does (so the replay can tell)."""

import importlib.util

import pytest

from servebench.recipe.schema.sweep import StopRule
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("replay_stopping", REPO / "benchmarks/replay_stopping.py")
replay_stopping = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay_stopping)
RECORDED = replay_stopping.results([REPO / "tests/data/long-cpu"])


def rows(target: float, min_s: float, min_requests: int) -> list[dict]:
    return [replay_stopping.replay(r, StopRule(mode="adaptive", min_s=min_s, min_requests=min_requests,
                                               target=target, slice_s=r.series.slice_s)) for _, r in RECORDED]


def test_four_recorded_points_each_with_a_series_of_the_whole_run():
    assert sorted(r.identity.case_id for _, r in RECORDED) == [
        "tiny-llama-cpu-dynamo-c2", "tiny-llama-cpu-dynamo-c4", "tiny-llama-cpu-vllm-c1", "tiny-llama-cpu-vllm-c4"]
    assert all(r.series.t[-1] >= 300 for _, r in RECORDED)


def test_the_default_rule_stops_no_recorded_point_on_an_estimate_outside_its_full_interval():
    default = StopRule(mode="adaptive")
    replayed = rows(default.target, default.min_s, default.min_requests)
    assert all(row["inside"] is not False for row in replayed), replayed
    assert all(row["low"] is not None for row in replayed)


@pytest.mark.parametrize("target", [0.08])
def test_a_loose_target_stops_early_and_some_early_estimates_miss(target):
    replayed = rows(target, 60, 200)
    stopped = [row for row in replayed if row["stop_s"] is not None]
    assert len(stopped) == 4 and sum(1 for row in stopped if not row["inside"]) >= 1, replayed
