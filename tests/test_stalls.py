"""#35: a point passes only if nothing stood still inside its measured window. SIGSTOP of vLLM's engine for 60 s
passed c1 (the frozen request counted as no error); SIGSTOP of AIPerf for 60 s passed c1 with a 73 s window for a
planned 20 s. The series (the engines' counters per slice, the generator's open requests per slice) shows both."""

import json
from dataclasses import replace

import pytest

from rackbench.load.records import Request
from rackbench.load.series import client_open, stalls
from rackbench.results import model as result
from rackbench.results.verdict import judge
from tests.conftest import REPO, by_id

C1 = REPO / "tests/data/long-cpu/points/tiny-llama-cpu-vllm-c1.json"


def series(n, **over):
    """``n`` one-second slices of a busy server, with ``over`` (name -> {slice: value}) changed."""
    s = {"t": [float(i + 1) for i in range(n)], "output_tps": [50.0] * n, "prompt_tps": [0.0] * n,
         "running": [1.0] * n, "waiting": [0.0] * n, "open_": [1] * n}
    for name, at in over.items():
        for i, v in at.items():
            s[name][i] = v
    return s


def test_a_stretch_without_progress_is_a_stall_of_the_server_or_of_the_load():
    still = {i: 0.0 for i in range(10, 22)}                         # 12 slices: 10..21, from 10 s to 22 s
    (st,) = stalls(**series(40, output_tps=still))
    assert (st.kind, st.from_s, st.to_s, st.seconds, st.in_flight) == ("server", 10.0, 22.0, 12.0, 1.0)
    idle = {i: 0.0 for i in range(10, 22)}
    (st,) = stalls(**series(40, output_tps=still, running=idle))
    assert (st.kind, st.seconds, st.in_flight) == ("load", 12.0, 1)       # the client held one the server had not
    (st,) = stalls(**series(40, output_tps=still, running=idle, open_={i: 0 for i in range(10, 22)}))
    assert (st.kind, st.seconds, st.in_flight) == ("load", 12.0, 0)       # nothing sent at all
    # prompt tokens are progress (a prefill); slices outside the window (open_ None) are start-up or wind-down
    assert stalls(**series(40, output_tps=still, prompt_tps={i: 900.0 for i in range(10, 22)})) == []
    assert stalls(**series(40, output_tps=still, running=idle, open_={i: None for i in range(10, 22)})) == []
    # one slice of progress splits a stretch: the longest piece is reported, for each kind
    found = stalls(**series(40, output_tps={**still, 15: 0.0, 16: 8.0}, running={i: 0.0 for i in range(30, 33)},
                            open_={}))
    assert [(s.kind, s.seconds) for s in found] == [("server", 6.0)]       # 30..32 idle but progressing: no stall


def test_the_generators_open_requests_per_slice_cover_only_its_measured_window():
    t0 = 1000.0
    reqs = [Request("profiling", True, start_s=t0 + 2.5, end_s=t0 + 6.0), Request("profiling", True, start_s=t0 + 3.0,
            end_s=t0 + 9.5), Request("profiling", False, start_s=t0 + 7.0)]          # never answered: open to the end
    assert client_open(reqs, t0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]) == \
        [None, None, None, 2, 2, 2, 1, 2, 2, 1]
    assert client_open([], t0, [1.0, 2.0]) == [None, None]


def judged(catalog, s: dict | None = None, **gates):
    prof = by_id(catalog, "tiny-llama-cpu-vllm")
    if gates:
        prof = replace(prof, spec=prof.spec.model_copy(update={"gates": prof.spec.gates.model_copy(update=gates)}))
    data = json.loads(C1.read_text())
    if s is not None:
        data["series"].update(s)
    return next(c for c in judge(result.parse(data), prof).checks if c.name == "stall")


def test_a_recorded_point_with_a_frozen_engine_or_generator_fails_with_the_stretch(catalog):
    data = json.loads(C1.read_text())["series"]
    n = len(data["t"])
    assert judged(catalog).ok, judged(catalog).message
    frozen = {"output_tps": [0.0 if 100 <= i < 140 else v for i, v in enumerate(data["output_tps"])],
              "prompt_tps": [0.0 if 100 <= i < 140 else v for i, v in enumerate(data["prompt_tps"])],
              "running": [1.0 if 100 <= i < 140 else v for i, v in enumerate(data["running"])]}
    check = judged(catalog, frozen)
    assert not check.ok and check.message.startswith(
        "the server's token counters stood still for 40.0 s (from 100.0 s to 140.0 s of the run) with 1 requests "
        "running or waiting: a stopped or hung engine"), check.message
    assert "profile.gates.max_stall_s = 30.0 s" in check.message
    assert judged(catalog, frozen, max_stall_s=45).ok                      # the bound is the profile's
    stopped = {**frozen, "running": [0.0 if 100 <= i < 140 else v for i, v in enumerate(data["running"])],
               "waiting": [0.0] * n, "client_open": [1 if 100 <= i < 140 else 0 for i in range(n)]}
    check = judged(catalog, stopped)
    assert not check.ok and check.message.startswith("the server's token counters stood still for 40.0 s (from "
                                                     "100.0 s to 140.0 s of the run) with no request running or "
                                                     "waiting while aiperf held 1 open: a stalled load generator"), \
        check.message


def test_a_result_without_a_series_says_the_stall_was_not_checked(catalog):
    prof = by_id(catalog, "tiny-llama-cpu-vllm")
    data = json.loads(C1.read_text())
    data["series"] = None
    check = next(c for c in judge(result.parse(data), prof).checks if c.name == "stall")
    assert check.ok and check.message == "not checked: no counter series of the point"


@pytest.mark.parametrize("value", [0, -1, "x"])
def test_a_bad_stall_bound_is_refused(catalog, value):
    from pydantic import ValidationError
    prof = by_id(catalog, "tiny-llama-cpu-vllm")
    with pytest.raises(ValidationError, match="max_stall_s"):
        type(prof.spec.gates).model_validate({**prof.spec.gates.model_dump(), "max_stall_s": value})


def test_the_servers_prompt_tokens_by_source_add_up_or_the_point_fails(catalog):
    """#33 item 2: computed + GPU prefix cache + CPU tier = the server's prompt tokens over the window (exactly so
    on every recorded point); a scrape that does not add up fails the point, saying by how much."""
    prof = by_id(catalog, "tiny-llama-cpu-vllm")
    data = json.loads(C1.read_text())
    check = next(c for c in judge(result.parse(data), prof).checks if c.name == "counters")
    assert check.ok and check.message.endswith("= 1,704,689) against the server's prompt tokens 1,704,689: they add up")
    data["server"]["prompt_tokens"] *= 1.05
    check = next(c for c in judge(result.parse(data), prof).checks if c.name == "counters")
    assert not check.ok and ": off by 4.8% (> 1.0%)" in check.message, check.message
    for key in ("prompt_tokens_local_compute", "prompt_tokens_local_cache_hit", "prompt_tokens_external"):
        data["server"][key] = 0.0                                  # an older vLLM: no per-source counter
    assert not [c for c in judge(result.parse(data), prof).checks if c.name == "counters"]


def test_unanswered_requests_of_a_working_server_outlived_the_grace_and_of_a_still_one_stopped(catalog):
    """#54: requests AIPerf gave up on at its grace's end. A server whose tokens move, or whose gauges change (a
    long prefill moves no counter but fills the KV cache), was working on them: counted as errors, said, not
    failed; one whose counters stood still and gauges held still from the last answer stopped: the point fails,
    naming it."""
    from rackbench.results.model import Series, Window
    from rackbench.results.checks.base import Judged
    from rackbench.results.checks.window import answered
    prof = by_id(catalog, "tiny-llama-cpu-vllm")

    def unanswered_check(r):
        return answered(Judged(r, prof))
    data = json.loads(C1.read_text())
    r = result.parse(data)
    t = [float(i) for i in range(1, 41)]
    base = dict(slice_s=1.0, t=t, output_tps=[10.0] * 20 + [0.0] * 20, prompt_tps=[5.0] * 20 + [0.0] * 20,
                requests=[1] * 40, running=[1.0] * 20 + [0.0] * 20, waiting=[0.0] * 40, kv_usage=[0.1] * 40,
                prefix_hit_share=[None] * 40, cpu_tier_share=[None] * 40, completed=[1] * 40,
                ttft_p50_ms=[None] * 40, client_open=[1] * 40)
    window = Window(start_s=2.0, end_s=38.0, last_answer_s=20.0)
    run = r.run.model_copy(update={"window": window})
    requests = r.requests.model_copy(update={"unanswered": 2})
    still = r.model_copy(update={"series": Series.model_validate(base), "run": run, "requests": requests})
    check = unanswered_check(still)
    assert not check.ok and "its engine stopped or hung" in check.message, check.message
    stale = {**base, "running": [1.0] * 21 + [0.0] * 19}     # the first scrape after the freeze: its last value
    assert not unanswered_check(still.model_copy(update={"series": Series.model_validate(stale)})).ok
    # a stopped engine's gauges keep their last values, requests running included (real vLLM under SIGSTOP)
    held = {**base, "running": [1.0] * 40}
    check = unanswered_check(still.model_copy(update={"series": Series.model_validate(held)}))
    assert not check.ok and "with 1 running or waiting: its engine stopped or hung" in check.message, check.message
    # a long prefill moves no counter, but its chunks fill the KV cache
    prefill = {**held, "kv_usage": [0.1] * 20 + [0.1 + 0.01 * i for i in range(20)]}
    busy = still.model_copy(update={"series": Series.model_validate(prefill)})
    assert unanswered_check(busy).ok and "outlived the grace" in unanswered_check(busy).message
    decoding = {**base, "output_tps": [10.0] * 40}
    busy = still.model_copy(update={"series": Series.model_validate(decoding)})
    assert unanswered_check(busy).ok and "outlived the grace" in unanswered_check(busy).message
    assert prof is not None
