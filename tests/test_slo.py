"""#32 item 1: service-level tiers per point: which requests were good (DistServe: every limit holds; failed or
unfinished is not), the attainment with a Wilson interval on an effective size (AR(1) correction), goodput, and
the `gates.slo` gate with its three answers. On real recorded AIPerf requests."""

import json
from dataclasses import replace

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.catalog.points import Point
from rackbench.core.errors import ConfigError
from rackbench.core.stats import effective_size, lag1, t_quantile, wilson
from rackbench.load.aiperf import records as aiperf_records
from rackbench.load.records import Request
from rackbench.recipe.schema.sweep import SloTier
from rackbench.report.files import markdown, Report
from rackbench.report.summary import properties
from rackbench.results.slo import good, tier_result
from rackbench.results.verdict import judge
from tests.conftest import REPO, by_id, edit, recorded

RUN = REPO / "tests/data/h200-gpu-run/aiperf/vllm-c8"          # 405 profiled requests of a real H200 point


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Statistics in Medicine 17:857-872,
# Table II, method 3 (score interval without continuity correction = Wilson), to the four places it prints. A
# published table rather than scipy.stats.binomtest: importing scipy.stats costs ~1 CPU-s of the offline suite.
@pytest.mark.parametrize("k, n, low, high", [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605),
                                             (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)])
def test_the_wilson_interval_is_newcombes_published_one(k, n, low, high):
    assert wilson(k / n, n) == pytest.approx((low, high), abs=5e-5)


def test_correlated_requests_count_for_fewer_and_widen_the_interval():
    assert effective_size(100, None) == effective_size(100, -0.3) == 100.0     # no credit for anti-correlation
    assert effective_size(100, 0.5) == pytest.approx(100 / 3)
    assert lag1([1, 1, 1, 0, 0, 0] * 10) > 0.3 and lag1([1, 0] * 30) < -0.9 and lag1([1, 1, 1]) is None
    assert lag1([1, 1, 1, 1, 0]) is None and lag1([0, 1, 1, 1, 1]) is None   # one side constant (a CI run's NaN)
    narrow, wide = wilson(0.9, 400), wilson(0.9, effective_size(400, 0.5))
    assert wide[0] < narrow[0] < 0.9 < narrow[1] < wide[1]


def test_a_request_is_good_only_when_every_limit_holds():
    tier = SloTier(ttft_ms=100, tpot_ms=10, e2e_ms=1000)
    ok = Request("profiling", True, start_s=0, end_s=0.5, ttft_ms=80, latency_ms=500, output_tokens=42)   # TPOT 10.24
    assert not good(ok, tier.limits) and good(ok, SloTier(ttft_ms=100, tpot_ms=10.3, e2e_ms=1000).limits)
    assert not good(replace(ok, ttft_ms=101), SloTier(ttft_ms=100).limits)
    assert not good(replace(ok, ok=False), SloTier(e2e_ms=10_000).limits)                # a failed request is not good
    assert not good(replace(ok, latency_ms=None, end_s=None), SloTier(ttft_ms=100).limits)   # nor one never finished
    assert good(replace(ok, output_tokens=1), SloTier(tpot_ms=1).limits)  # one token: no later token is late
    with pytest.raises(ValueError, match="at least one limit"):
        SloTier(attainment=0.9)
    with pytest.raises(ValueError):
        SloTier(ttft_ms=100, attainment=1.0)       # no finite run shows a share of 1 with confidence


def test_a_tier_whose_only_bad_request_is_the_last_is_judged_not_refused():
    """A frozen engine left one request of five unfinished, last: its lag-1 correlation was NaN and the result
    failed to validate, taking the point's verdict with it."""
    sent = [Request("profiling", True, start_s=i, end_s=i + 0.5, ttft_ms=50, latency_ms=500, output_tokens=10)
            for i in range(4)] + [Request("profiling", False, start_s=4.0)]
    t = tier_result("chat", SloTier(ttft_ms=100), sent, 5.0, gpus=1)
    assert (t["good"], t["requests"], t["lag1"], t["effective_n"]) == (4, 5, None, 5.0) and t["verdict"]


def test_a_tier_on_real_requests_counts_them_corrects_for_their_correlation_and_gives_goodput():
    rec = aiperf_records.read(RUN)
    sent = rec.profiled
    tier = SloTier(ttft_ms=150, tpot_ms=20, attainment=0.8)
    t = tier_result("chat", tier, sent, rec.stat("duration_s"), gpus=1)
    by_hand = [q for q in sent if q.ok and q.ttft_ms <= 150 and (q.latency_ms - q.ttft_ms) / (q.output_tokens - 1) <= 20]
    assert (t["requests"], t["good"]) == (405, len(by_hand)) and 0 < t["good"] < 405
    assert t["attainment"] == pytest.approx(len(by_hand) / 405)
    assert t["lag1"] > 0.1 and t["effective_n"] < 405 * 0.9                   # consecutive requests are correlated
    assert t["batches"] >= 8           # Wilson on the smaller effective size, Student's t on the batch means' df
    assert (t["low"], t["high"]) == pytest.approx(wilson(t["attainment"], t["effective_n"],
                                                         t_quantile(0.975, t["batches"] - 1)))
    assert t["goodput_rps"] == pytest.approx(len(by_hand) / rec.stat("duration_s"))
    assert t["good_output_tps_per_gpu"] == pytest.approx(sum(q.output_tokens for q in by_hand) / rec.stat("duration_s"))
    share = t["attainment"]
    verdicts = {target: tier_result("chat", SloTier(ttft_ms=150, tpot_ms=20, attainment=target), sent,
                                    rec.stat("duration_s"), 1)["verdict"]
                for target in (round(share - 0.2, 3), round(share, 3), min(0.99, round(share + 0.2, 3)))}
    assert list(verdicts.values()) == ["met", "unresolved", "missed"], (share, verdicts)


@pytest.fixture
def slo_catalog(recipes):
    edit(recipes / "kimi-k3/gb200/dep.yaml", "  name: dep\n",
         "  name: dep\n  gates: {slo: chat}\n  slo:\n    chat: {ttft_ms: 150, tpot_ms: 20, attainment: TARGET}\n")
    return recipes


@pytest.mark.parametrize("target, ok, said", [
    (0.9, True, "SLO met: tier chat (TTFT <= 150.0 ms, TPOT <= 20.0 ms): "),
    (0.99, False, "SLO missed: tier chat "),
    (0.95, False, "SLO unresolved: tier chat ")])
def test_the_slo_gate_passes_a_met_tier_and_fails_a_missed_or_unresolved_one(slo_catalog, target, ok, said):
    path = slo_catalog / "kimi-k3/gb200/dep.yaml"
    path.write_text(path.read_text().replace("TARGET", str(target)))
    prof = by_id(Catalog.load(slo_catalog), "kimi-k3-gb200-dep")
    r = recorded(Point(prof, 8), RUN)
    (check,) = [c for c in judge(r, prof).checks if c.name == "slo"]
    assert check.ok is ok and check.message.startswith(said), check.message
    assert "95% interval [" in check.message and "(Wilson, effective n " in check.message
    assert [t.tier for t in r.slo] == ["interactive", "batch", "chat"]       # _agentx.yaml's tiers, then this one's
    tier = r.slo[2]
    assert tier.gated and properties(r)["slo_attainment"] == tier.attainment   # the gated tier heads the metrics
    page = markdown(Report([r], {}), [], [])
    assert "## Service-level tiers" in page and f"| {r.identity.case_id} | chat (gate) |" in page
    assert tier.batches == 10 and f"| 10 | {tier.verdict} |" in page and ", 10 batch means)" in check.message


@pytest.mark.catalog("kimi-k3")
def test_a_gate_naming_a_tier_that_is_not_defined_is_refused_naming_the_file(recipes):
    edit(recipes / "kimi-k3/gb200/dep.yaml", "  name: dep\n", "  name: dep\n  gates: {slo: fast}\n")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    text = str(err.value)
    assert "dep.yaml" in text and "gates.slo names the tier 'fast', which profile.slo does not define" in text, text


def test_the_pareto_plot_marks_where_each_tiers_tpot_bounds_interactivity(tmp_path):
    """#32: a tier's TPOT limit t ms is the interactivity 1000 / t tok/s per user; the plot draws it."""
    from rackbench.report import plots
    from rackbench.results.model import PointResult
    data = json.loads((REPO / "tests/data/long-cpu/points/tiny-llama-cpu-vllm-c4.json").read_text())
    tiers = [SloTier(ttft_ms=300, tpot_ms=10, attainment=0.9), SloTier(ttft_ms=1000, e2e_ms=2000)]
    data["slo"] = [tier_result(name, t, [], 1.0, gpus=1) for name, t in zip(("interactive", "relaxed"), tiers)]
    r = PointResult.model_validate(data)
    assert plots.tier_lines([r, r]) == [("interactive: TPOT <= 10 ms", 100.0)]     # relaxed has no TPOT limit
    assert plots.tier_lines([r.model_copy(update={"slo": []})]) == []
    out = plots.pareto("tiny", "local-cpu", {"vllm": [r]}, tmp_path / "p.png")
    assert out is not None and out.stat().st_size > 10_000


def test_an_attainment_that_swings_over_minutes_gets_the_interval_of_its_batch_means_not_of_neighbours():
    """At the boundary an agentic replay's attainment moves from minute to minute (grid-cpu's c24: 71-89%); within a
    minute the outcomes are nearly independent, so the AR(1) size takes the swings for noise and its interval is too
    narrow. Here: 3,000 requests in blocks of 300 alternately 70% and 90% good (independent within a block)."""
    import random
    rng = random.Random(7)
    flags = [rng.random() < (0.7 if (i // 300) % 2 == 0 else 0.9) for i in range(3000)]
    sent = [Request("profiling", True, start_s=i * 0.1, end_s=i * 0.1 + 1, ttft_ms=50 if f else 500,
                    latency_ms=1000, output_tokens=10) for i, f in enumerate(flags)]
    t = tier_result("chat", SloTier(ttft_ms=100, attainment=0.78), sent, 300.0, gpus=1)
    assert abs(t["lag1"]) < 0.1 and t["batches"] == 10                       # neighbours look independent
    ar1 = wilson(t["attainment"], 3000 * (1 - t["lag1"]) / (1 + t["lag1"]) if t["lag1"] > 0 else 3000)
    assert t["effective_n"] < 3000 / 4                                        # the swings cost three quarters
    assert (t["high"] - t["low"]) > 2 * (ar1[1] - ar1[0])
    assert ar1[0] > 0.78 and t["low"] < 0.78 and t["verdict"] == "unresolved"  # 80.4%: AR(1) alone says met
