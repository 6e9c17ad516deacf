"""#32 item 3: `--run-length decide` stops a point once its SLO verdict is resolved (met or missed with confidence,
corrected for the planned looks), at the adaptive rule's geometric checkpoints, never on fewer than 100 requests.
Offline on real recorded H200 requests; tests/test_live.py stops a real CPU point this way."""

import pytest

from rackbench.load.aiperf import records as aiperf_records
from rackbench.load.stopping import MIN_DECIDE_REQUESTS, DecideController, checkpoints
from rackbench.recipe.schema.sweep import SloTier, StopRule
from rackbench.results.slo import decider, tier_result
from tests.conftest import REPO

REQUESTS = sorted(aiperf_records.read(REPO / "tests/data/h200-gpu-run/aiperf/vllm-c8").profiled,
                  key=lambda q: q.start_s)           # 405 requests, 95.8% within TTFT 150 ms and TPOT 20 ms


def test_the_controller_looks_at_the_checkpoints_and_stops_on_the_first_resolved_verdict():
    rule = StopRule(mode="decide", min_s=20, growth=1.5)
    seen: list[tuple[int, int]] = []
    sent = {"n": 50}

    def decide(requests, looks):
        seen.append((len(requests), looks))
        return "decided" if len(requests) >= 200 else None
    ctl = DecideController(rule, 120, lambda: REQUESTS[:sent["n"]], decide)
    # 20, 30, 45, 67.5, 101.25, and the cap: the budget is spread over the cap's judgement too (#53)
    assert ctl.planned == len(checkpoints(rule, 120)) + 1 == 6
    assert ctl.poll(10.0) is None and ctl.looks == []                      # before the first checkpoint: no look
    assert ctl.poll(20.0) is None and seen == []                           # 50 < 100 requests: not even asked
    assert ctl.looks[-1][1] == f"50 of the {MIN_DECIDE_REQUESTS} requests a decision needs"
    sent["n"] = 150
    assert ctl.poll(31.0) is None and seen == [(150, 6)] and ctl.looks[-1][1] == "not resolved at 150 requests"
    sent["n"] = 250
    assert ctl.poll(33.0) is None                                          # between checkpoints: no look
    assert ctl.poll(46.0) == "decided" and ctl.poll(70.0) is None          # once stopped, it says nothing more
    assert [t for t, _ in ctl.looks] == [20.0, 31.0, 46.0]


def test_a_tier_far_from_its_target_is_decided_early_and_one_at_its_target_never():
    far = decider("chat", SloTier(ttft_ms=150, tpot_ms=20, attainment=0.6), gpus=1)
    said = far(REQUESTS[:120], 6)
    assert said.startswith("decided: tier chat met at 120 requests") and "at 99.17% (95% over 6 planned looks, the cap included)" in said
    missed = decider("chat", SloTier(ttft_ms=50, attainment=0.9), gpus=1)
    assert missed(REQUESTS[:120], 6).startswith("decided: tier chat missed at 120 requests")
    close = decider("chat", SloTier(ttft_ms=150, tpot_ms=20, attainment=0.95), gpus=1)
    assert close(REQUESTS, 6) is None                                      # 95.8% of 405: unresolved however long


def test_more_planned_looks_ask_for_more_evidence():
    tier = SloTier(ttft_ms=150, tpot_ms=20, attainment=0.9)
    once = tier_result("chat", tier, REQUESTS, None, 1)
    assert once["verdict"] == "met"                                        # at 95%, from all 405 requests
    found = [n for n in range(100, 406, 5) if decider("chat", tier, 1)(REQUESTS[:n], 1)]
    late = [n for n in range(100, 406, 5) if decider("chat", tier, 1)(REQUESTS[:n], 20)]
    assert found and (not late or min(late) >= min(found)), (found[:3], late[:3])


@pytest.mark.parametrize("mode", ["fixed", "adaptive", "decide", "bogus"])
def test_every_run_length_is_accepted_by_the_recipe_and_the_result_and_no_other(mode):
    import json
    from pydantic import ValidationError
    from rackbench.results import model
    data = json.loads((REPO / "tests/data/long-cpu/points/tiny-llama-cpu-vllm-c1.json").read_text())
    data["run"]["mode"] = mode
    if mode == "bogus":
        with pytest.raises(ValidationError):
            StopRule(mode=mode)
        assert model.problems(data)
    else:
        assert StopRule(mode=mode).mode == mode and model.problems(data) == []
