"""The adaptive stopping rule replayed on recorded full-length points (tests/data/long-cpu: four 320 s points of the
embedded default with their series; tests/data/long-h200: four 269-283 s H200 points and two adaptive ones), as
docs/measurements.md reports: the default rule never stops one of them on an estimate outside the full run's 95%
interval, and a loose target does (so the replay can tell)."""

import importlib.util

import pytest

from servebench.recipe.schema.sweep import StopRule
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("replay_stopping", REPO / "benchmarks/replay_stopping.py")
replay_stopping = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay_stopping)
RECORDED = replay_stopping.results([REPO / "tests/data/long-cpu"])
H200 = replay_stopping.results([REPO / "tests/data/long-h200/long"])


def rows(target: float, min_s: float, min_requests: int, recorded=RECORDED) -> list[dict]:
    return [replay_stopping.replay(r, StopRule(mode="adaptive", min_s=min_s, min_requests=min_requests,
                                               target=target, slice_s=r.series.slice_s)) for _, r in recorded]


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


def test_the_h200_recordings_are_replayed_and_show_what_docs_measurements_says():
    """All six H200 recordings read as results of schema 4 with their series; on the four fixed ones the default
    rule stops none, and a ±8% target stops all four, three on an estimate outside the full run's interval."""
    assert len(replay_stopping.results(replay_stopping.DEFAULT)) == 4 + 6
    assert sorted(r.identity.case_id for _, r in H200) == [
        "llama-770m-h200-vllm-c32", "llama-770m-h200-vllm-c8", "llama-770m-h200-vllm_offload-c32",
        "llama-770m-h200-vllm_offload-c8"]
    assert all(r.series.t[-1] >= 240 and r.schema_version == 4 for _, r in H200)
    default = StopRule(mode="adaptive")
    assert [row["stop_s"] for row in rows(default.target, default.min_s, default.min_requests, H200)] == [None] * 4
    loose = rows(0.08, 60, 200, H200)
    assert all(row["stop_s"] is not None for row in loose) and sum(1 for row in loose if not row["inside"]) == 3
