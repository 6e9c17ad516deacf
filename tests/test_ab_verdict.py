"""#33 item 4: the offload A/B as a verdict. Per shared concurrency the offload arm's change in output tok/s per GPU
and TTFT p50/p99, each with a 95% interval (within-run bootstrap of each arm's own requests) and a verdict; the
lowest concurrency from which the offload pays. On a real H200 pair (ctx16k: base and CPU-offload at c8)."""

import json
import shutil

import pytest

from rackbench.catalog.points import Point
from rackbench.core.results_folder import ResultsFolder
from rackbench.history.compare import Change
from rackbench.report import ab, offload
from rackbench.report.files import write
from rackbench.server import counters
from tests.conftest import REPO, by_id, recorded

H200 = REPO / "tests/data/h200/ctx16k"


def folder_of_the_pair(catalog, tmp_path):
    """A results folder as a session leaves it: both arms' points and their AIPerf records."""
    out = ResultsFolder.at(tmp_path / "res")
    out.points.mkdir(parents=True)
    for arm, name in (("base", "llama-770m-h200-vllm"), ("offload", "llama-770m-h200-vllm_offload")):
        prof = by_id(catalog, name)
        before = counters.parse((H200 / f"{arm}-c8-before.prom").read_text())
        after = counters.parse((H200 / f"{arm}-c8-after.prom").read_text())
        r = recorded(Point(prof, 8), H200 / f"{arm}-c8", versions={"vllm": "0.26.0"}, before=before, after=after)
        out.point(r.identity.case_id).write_text(json.dumps(r.dump()))
        shutil.copytree(H200 / f"{arm}-c8", out.case(prof.id, r.identity.case_id).load_dir("aiperf"))
    return out


def edit_point(out, case: str, change) -> None:
    """Change one stored point's JSON in place (``change(data)``), as an edited or older results folder holds it."""
    path = out.point(case)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def pair_report(catalog, tmp_path_factory):
    """The pair's folder and its report, written once for the tests that only read them."""
    out = folder_of_the_pair(catalog, tmp_path_factory.mktemp("pair"))
    return out, write(out.root)


def test_a_window_too_short_for_three_time_blocks_gets_no_interval_and_says_so(pair_report):
    """#53 item 4: the bootstrap resamples blocks of consecutive time (at least 10 s), not single requests; these
    recorded c8 points measured 13-15 s, too short for three blocks, so each change says "too short", without an
    interval, and the offload pays from nowhere (before, single requests gave it an interval 3x too narrow)."""
    out, rep = pair_report
    (pair,) = offload.pairs(rep.points)
    found = dict(rep.ab)[pair]                         # ab.gains as the report computed it for its table and plot
    tps = found[8]["output_tps_per_gpu"]
    assert (tps.low, tps.high, tps.verdict, tps.basis) == (None, None, "too short", "within-run bootstrap"), tps
    # #33 item 4: the same changes in junit's session-wide properties (the plugin adds them after the report)
    props = ab.properties(rep.ab)
    key = "ab_llama-770m-h200-vllm_offload_vs_llama-770m-h200-vllm"
    assert props[f"{key}_c8_output_tps_per_gpu"] == tps.text() and tps.text().endswith("%  too short")
    assert f"{key}_c8_ttft_p50_ms" in props
    assert props[f"{key}_pays_from"] == "nowhere"
    assert set(found[8]) == set(ab.GAINS) and all(c.verdict == "too short" for c in found[8].values())
    page = out.report.joinpath("report.md").read_text()
    row = next(ln for ln in page.splitlines() if ln.startswith("| 8 |"))
    assert "too short" in row, row


@pytest.fixture(scope="module")
def long_pair(tmp_path_factory):
    """The recorded 7B pair on the H200 (c4 80 s, c32 120 s) and its report, written into a copy."""
    root = tmp_path_factory.mktemp("h200-7b") / "h200-7b"
    shutil.copytree(REPO / "tests/data/h200-7b", root)
    return ResultsFolder.at(root), write(root)


def test_each_shared_concurrency_gets_its_change_with_an_interval_and_a_verdict(long_pair):
    out, rep = long_pair
    (pair,) = offload.pairs(rep.points)
    found = dict(rep.ab)[pair]
    tps = found[32]["output_tps_per_gpu"]
    assert tps.low < tps.rel < tps.high and tps.basis == "within-run bootstrap", tps
    assert tps.verdict == ("better" if tps.low > 0 else "worse" if tps.high < 0 else "within noise") == "better"
    assert set(found[32]) == set(ab.GAINS) and all(c.low is not None for c in found[32].values())
    page = out.report.joinpath("report.md").read_text()
    row = next(ln for ln in page.splitlines() if ln.startswith("| 32 |"))
    assert tps.text() in row, (tps.text(), row)
    assert "intervals: within-run bootstrap" in page


def change(verdict):
    return {"output_tps_per_gpu": Change("output_tps_per_gpu", 1.0, 1.1, 0.1, 0.0, 0.2, verdict)}


def test_the_offload_pays_from_the_lowest_concurrency_better_at_it_and_above():
    assert ab.pays_from({8: change("worse"), 32: change("better"), 64: change("better")}) == 32
    assert ab.pays_from({8: change("better"), 32: change("within noise"), 64: change("better")}) == 64
    assert ab.pays_from({8: change("better"), 32: change("worse")}) is None
    assert ab.summary_line({8: change("better"), 32: change("better")}).startswith("**The offload pays from c8**")
    assert ab.summary_line({8: change("worse")}).startswith("The offload is better with confidence")


def test_arms_that_differ_in_more_than_the_offload_get_no_ratio_and_say_in_what(catalog, tmp_path):
    """#33 item 3: a changed trace (another seed), other server versions or another layout void the comparison."""
    out = folder_of_the_pair(catalog, tmp_path)
    edit_point(out, "llama-770m-h200-vllm_offload-c8", lambda d: d["identity"].update(
        load_fingerprint="0" * 64,                                      # its sessions drawn with another seed
        versions={**d["identity"]["versions"], "vllm": "0.27.0"}))
    rep = write(out.root)
    (pair,) = offload.pairs(rep.points)
    assert pair.shared == () and pair.differs == ("load (its trace: sessions, seed, shape)", "server versions")
    assert offload.rows(rep.points, pair) == [] and ab.gains(out.root, rep.points, pair) == {}
    page = out.report.joinpath("report.md").read_text()
    assert "No verdict: the arms differ in more than the offload (load (its trace: sessions, seed, shape), server " \
           "versions), so no ratio of theirs measures the offload." in page
    assert "| 8 |" not in page.split("### Offload A/B", 1)[1]


def test_a_pair_with_a_point_that_started_on_a_warm_cache_gets_no_ratio_and_names_it(catalog, tmp_path):
    """#33 items 2-3: a point whose server served more from its caches than its trace allows started warm; its
    pair's comparison is void, and report.md names the point."""
    out = folder_of_the_pair(catalog, tmp_path)
    rep = write(out.root)
    (pair,) = offload.pairs(rep.points)
    assert pair.void == () and pair.shared == (8,)
    edit_point(out, "llama-770m-h200-vllm-c8", lambda d: d.update(reuse={
        "source": "test", "block_size": 16, "allowed_share": 0.5, "measured_share": 0.7, "gap": -0.2,
        "prompt_tokens_mean": 4000.0, "working_set_tokens": 32000.0, "cache_tokens": 32768.0, "should_hold": True,
        "warm": True}))
    rep = write(out.root)
    (pair,) = offload.pairs(rep.points)
    assert pair.void == ("llama-770m-h200-vllm-c8 started on a warm prefix cache",) and pair.shared == ()
    assert pair.differs == ()
    assert offload.rows(rep.points, pair) == [] and ab.gains(out.root, rep.points, pair) == {}
    page = out.report.joinpath("report.md").read_text()
    assert "No verdict: llama-770m-h200-vllm-c8 started on a warm prefix cache, so no ratio" in page
    assert ab.properties(rep.ab) == {"ab_llama-770m-h200-vllm_offload_vs_llama-770m-h200-vllm_verdict":
                                     "no verdict: llama-770m-h200-vllm-c8 started on a warm prefix cache"}


def test_arms_with_unequal_ready_workers_get_no_ratio_and_a_lost_worker_fails_its_point(catalog, tmp_path):
    """#33 item 3 (Dynamo's KV-router A/B guide: unequal Ready workers void a comparison): each point records the
    serving instances ready at its start; a pair whose arms had other counts is no A/B, and a point that started with
    fewer than its deployment came up with fails, saying so."""
    from rackbench.results.model import parse
    from rackbench.results.verdict import judge
    out = folder_of_the_pair(catalog, tmp_path)
    for name, ready in (("llama-770m-h200-vllm-c8", 2), ("llama-770m-h200-vllm_offload-c8", 1)):
        edit_point(out, name, lambda d, ready=ready: d["run"].update(ready_workers=ready, expected_workers=2))
    rep = write(out.root)
    (pair,) = offload.pairs(rep.points)
    assert pair.differs == ("Ready workers at the point's start",) and offload.rows(rep.points, pair) == []
    lost = next(r for r in rep.points if r.identity.case_id.endswith("offload-c8"))
    checks = {c.name: c for c in judge(parse(lost.model_dump(mode="json")),
                                       by_id(catalog, "llama-770m-h200-vllm_offload")).checks}
    assert not checks["workers"].ok and checks["workers"].message.startswith(
        "1 of the 2 serving instances ready at the point's start")
    base = next(r for r in rep.points if r.identity.case_id.endswith("vllm-c8"))
    assert "workers" not in {c.name for c in judge(base, by_id(catalog, "llama-770m-h200-vllm")).checks}


KV_PAGE = """# HELP dynamo_component_kv_cache_events_applied KV events the indexer applied
# TYPE dynamo_component_kv_cache_events_applied counter
dynamo_component_kv_cache_events_applied{event_type="stored",status="ok"} 12
dynamo_component_kv_cache_events_applied{event_type="removed",status="ok"} 3
dynamo_component_kv_cache_events_applied{event_type="removed",status="block_not_found"} 2
dynamo_frontend_requests_total{model="m"} 9
"""


def test_the_kv_routers_applied_events_are_read_from_the_frontends_page_by_status():
    """#33 item 3: Dynamo's KV router counts the KV events its indexer applied (kv_cache_events_applied, prefixed
    dynamo_component_ or dynamo_kvrouter_ by release); a page without the family is no router to judge."""
    assert counters.kv_events(KV_PAGE) == {"ok": 15.0, "block_not_found": 2.0}
    other = 'dynamo_kvrouter_kv_cache_events_applied_total{event_type="stored",status="ok"} 7\n'
    assert counters.kv_events(other) == {"ok": 7.0}
    assert counters.kv_events("dynamo_frontend_requests_total 9\n") is None
    from rackbench.results.build import kv_events_delta
    assert kv_events_delta({"ok": 15.0}, {"ok": 40.0, "block_not_found": 2.0}) == {"block_not_found": 2.0, "ok": 25.0}
    assert kv_events_delta(None, {"ok": 1.0}) is None


def test_only_a_kv_router_is_asked_for_its_events(catalog):
    from types import SimpleNamespace
    from rackbench.server.frontends.dynamo import DynamoFrontend
    from rackbench.server.frontends.vllm import VllmFrontend
    plan = SimpleNamespace(api_url="http://h:8000")
    kv, rr = by_id(catalog, "kimi-k3-gb200-dep"), by_id(catalog, "llama-7b-h200-dynamo")
    assert (kv.recipe.frontend.args or {}).get("router-mode") == "kv"
    assert DynamoFrontend().router_metrics_url(kv, plan) == "http://h:8000/metrics"
    assert DynamoFrontend().router_metrics_url(rr, plan) is None                 # round-robin: no indexer
    assert VllmFrontend().router_metrics_url(by_id(catalog, "llama-7b-h200-vllm"), plan) is None


def test_a_kv_router_that_applied_no_event_fails_its_point_and_voids_its_pair(catalog, tmp_path):
    """Dynamo's KV-router A/B guide: workers publishing no KV events leave the router blind, and a comparison of
    such arms is void. A point whose router applied none fails, naming what to check; its pair gets no ratio."""
    from rackbench.results.model import parse
    from rackbench.results.verdict import judge
    out = folder_of_the_pair(catalog, tmp_path)
    for name, events in (("llama-770m-h200-vllm-c8", {"ok": 120.0}),
                         ("llama-770m-h200-vllm_offload-c8", {"ok": 0.0, "block_not_found": 4.0})):
        edit_point(out, name, lambda d, events=events: d["run"].update(kv_events=events))
    rep = write(out.root)
    (pair,) = offload.pairs(rep.points)
    assert pair.void == ("llama-770m-h200-vllm_offload-c8's KV router applied no KV event",) and pair.shared == ()
    blind = next(r for r in rep.points if r.identity.case_id.endswith("offload-c8"))
    checks = {c.name: c for c in judge(parse(blind.model_dump(mode="json")),
                                       by_id(catalog, "llama-770m-h200-vllm_offload")).checks}
    assert not checks["kv-events"].ok and checks["kv-events"].message.startswith(
        "the KV router applied 0 KV events over the run; not applied: 4 block_not_found: it routed without")
    base = next(r for r in rep.points if r.identity.case_id.endswith("vllm-c8"))
    seen = {c.name: c for c in judge(base, by_id(catalog, "llama-770m-h200-vllm")).checks}["kv-events"]
    assert seen.ok and seen.message == "the KV router applied 120 KV events over the run"


def test_each_frontend_counts_its_ready_workers_its_own_way():
    from types import SimpleNamespace
    from rackbench.server.frontends.dynamo import DynamoFrontend
    from rackbench.server.frontends.vllm import VllmFrontend
    plan = SimpleNamespace(health_urls=("http://a:1/health", "http://b:1/health"), api_url="http://a:8000")
    listed = {"instances": [{"endpoint": "generate"}, {"endpoint": "generate"}, {"endpoint": "clear_kv_blocks"}]}
    answers = {"http://a:1/health": (200, {"status": "ready"}), "http://b:1/health": (503, "loading"),
               "http://a:8000/health": (200, listed)}
    assert VllmFrontend().ready_workers(plan, answers) == 1          # the API servers answering /health
    assert DynamoFrontend().ready_workers(plan, answers) == 2        # what the frontend's router lists


def test_the_ab_plot_draws_each_changes_interval_on_the_offload_arm(long_pair):
    """#33 item 4: the interval of the change B / A - 1 on the offload arm's bar and line: base x (1 + low) to
    base x (1 + high)."""
    from rackbench.report import plots
    out, rep = long_pair
    (pair,) = offload.pairs(rep.points)
    rows, found = offload.rows(rep.points, pair), dict(rep.ab)[pair]
    bars = plots.interval_bars(rows, found, "output_tps_per_gpu", "tps_gpu")
    i = next(k for k, row in enumerate(rows) if row["concurrency"] == 32)
    ((_, y, below, above),) = [b for b in bars if b[0] == i]
    ch, row = found[32]["output_tps_per_gpu"], rows[i]
    assert y == row["offload_tps_gpu"]
    assert y - below == pytest.approx(row["base_tps_gpu"] * (1 + ch.low)) and below > 0
    assert y + above == pytest.approx(row["base_tps_gpu"] * (1 + ch.high)) and above > 0
    assert len(plots.interval_bars(rows, found, "ttft_p50_ms", "ttft_p50")) == len(rows)
    assert plots.interval_bars(rows, {}, "output_tps_per_gpu", "tps_gpu") == []      # no interval: no bar
    assert out.report.joinpath(f"offload-ab-{pair.offload}-vs-{pair.base}.png").stat().st_size > 10_000


def test_each_arms_slo_search_answer_stands_side_by_side_in_the_ab_section(catalog, tmp_path):
    """#33 item 5: where both arms searched a tier, the highest concurrency meeting it per arm, its bracket, and how
    far the offload moves it; a tier only one arm searched says so."""
    out = folder_of_the_pair(catalog, tmp_path)
    out.searches.mkdir(parents=True)
    for profile, tier, answer, bracket in (("llama-770m-h200-vllm", "chat", 16, [16, 24]),
                                           ("llama-770m-h200-vllm_offload", "chat", 24, [24, 32]),
                                           ("llama-770m-h200-vllm_offload", "batch", None, [None, 8])):
        (out.searches / f"{profile}-{tier}.json").write_text(json.dumps(
            {"profile": profile, "tier": tier, "target": 0.95, "limits": {"ttft_ms": 500.0}, "answer": answer,
             "bracket": bracket, "why": "test",
             "cliff": None, "probes": []}))
    rep = write(out.root)
    page = out.report.joinpath("report.md").read_text().split("### Offload A/B", 1)[1]
    assert "| chat | c16 [c16, c24] | c24 [c24, c32] | +8 |" in page
    assert "| batch | not searched | none in its range (first probe missed: c8) | — |" in page
    (pair,) = offload.pairs(rep.points)
    assert ab.tier_answers(pair, []) == []
