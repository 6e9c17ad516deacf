"""#57 item 2: a ranking (recipes/rankings/) names the search profiles it compares for one tier; the catalog refuses
one that cannot answer, naming the file, the key and the fix; its arms run reference first and are judged by the
limits the reference measured; pytest selects it with `-m rank` / `-k rank`; `rackbench plan` prices it."""

import json

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.catalog.rankings import problems_of, referenced
from rackbench.core.errors import ConfigError
from rackbench.core.results_folder import ResultsFolder
from rackbench.plugin.search import Relative, shared_limits
from rackbench.recipe.schema.ranking import RankingSpec
from rackbench.report.plan import estimate, ranking_estimate
from tests.conftest import REPO, edit, run_cli

LOCAL = ["tiny-llama-cpu-vllm_rank", "tiny-llama-cpu-dynamo_rank"]
GB200 = [f"kimi-k3-gb200-{n}_search" for n in ("tp", "tep", "dep", "dep_offload")]


def spec(**kw) -> RankingSpec:
    return RankingSpec(**{"name": "r", "tier": "search", "arms": LOCAL, "reference": LOCAL[0], **kw})


def test_the_shipped_rankings_load_with_their_reference_first(catalog):
    local, gb200 = catalog.ranking("local-cpu"), catalog.ranking("kimi-k3-gb200")
    assert [p.id for p in local.arms] == LOCAL and local.markers == ["local"]
    assert sorted(p.id for p in gb200.arms) == sorted(GB200) and "gb200" in gb200.markers
    assert referenced(catalog.rankings, LOCAL[1]) == LOCAL[0] and referenced(catalog.rankings, LOCAL[0]) is None
    # every GB200 arm replays the same load (the ranking refuses arms whose load differs)
    assert len({p.load_fingerprint for p in gb200.arms}) == 1 and len({p.load_fingerprint for p in local.arms}) == 1


@pytest.mark.parametrize("change, key, said, fix", [
    ({"arms": [LOCAL[0], "nope"]}, "arms[1]", "no profile 'nope'", "use a search profile's id"),
    ({"arms": [LOCAL[0], "tiny-llama-cpu-vllm"]}, "arms[1]", "is not a search", "give it a search"),
    ({"tier": "interactive", "reference": None}, "arms[0]", "searches tier 'search', the ranking 'interactive'",
     "set tier: search"),
    ({"arms": [LOCAL[0], LOCAL[0]]}, "arms", "named twice", "once"),
    ({"reference": "kimi-k3-gb200-tp_search"}, "reference", "is not one of the arms", "name one of"),
    ({"reference": None}, "reference", "their answers, judged by different limits, would not rank",
     "set `reference:`"),
])
def test_a_ranking_that_cannot_answer_is_refused_naming_the_key_and_the_fix(catalog, change, key, said, fix):
    by_id = {p.id: p for p in catalog.profiles}
    found = [p for p in problems_of(spec(**change), "rankings/r.yaml", by_id) if p.key == key]
    assert found and said in found[0].message and fix in found[0].fix, found


def test_a_broken_ranking_fails_the_catalog_load_with_its_file(recipes):
    edit(recipes / "rankings/local-cpu.yaml", "reference: tiny-llama-cpu-vllm_rank\n", "reference: vllm\n")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    assert "rankings/local-cpu.yaml" in str(err.value) and "'vllm' is not one of the arms" in str(err.value)


def test_two_rankings_naming_two_references_for_one_arm_are_refused():
    from rackbench.catalog.rankings import Ranking
    a = Ranking(spec(), "a.yaml", ())
    b = Ranking(spec(arms=["third", LOCAL[1]], reference="third"), "b.yaml", ())
    assert referenced([a], LOCAL[1]) == LOCAL[0] and referenced([b], LOCAL[1]) == "third"
    with pytest.raises(ConfigError, match="two references"):
        referenced([a, b], LOCAL[1])
    assert referenced([a, b], LOCAL[0]) is None and referenced([a, b], "third") is None


def test_an_arm_is_judged_by_the_limits_its_reference_stored_in_the_same_run(catalog, tmp_path):
    folder = ResultsFolder.at(tmp_path)
    arm = next(p for p in catalog.profiles if p.id == LOCAL[1])
    assert shared_limits(arm, catalog.rankings, folder) is None          # the reference has not run: its own
    stored = {"profile": LOCAL[0], "tier": "search", "limits": {"ttft_ms": 412.5, "tpot_ms": 61.0}, "target": 0.8,
              "relative": {"ttft_p50_ms": 82.5, "tpot_p50_ms": 12.2, "requests": 40, "dropped": [],
                           "case_id": f"{LOCAL[0]}-c1", "multiples": {"ttft": 5.0, "tpot": 5.0}}}
    folder.search(LOCAL[0]).parent.mkdir(parents=True)
    folder.search(LOCAL[0]).write_text(json.dumps(stored))
    got = shared_limits(arm, catalog.rankings, folder)
    assert isinstance(got, Relative) and got.tier.limits == stored["limits"] and got.tier.attainment == 0.8
    assert got.reference["from"] == LOCAL[0] and got.reference["case_id"] == f"{LOCAL[0]}-c1"
    # the reference itself, and a profile in no ranking, set their own
    ref = next(p for p in catalog.profiles if p.id == LOCAL[0])
    assert shared_limits(ref, catalog.rankings, folder) is None
    folder.search(LOCAL[0]).write_text(json.dumps({**stored, "tier": "relaxed"}))
    assert shared_limits(arm, catalog.rankings, folder) is None          # another tier's limits are not taken
    folder.search(LOCAL[0]).write_text('{"tier": ')
    assert shared_limits(arm, catalog.rankings, folder) is None          # a torn answer: said, not a traceback


def test_the_gb200_ranking_collects_its_four_searches_and_itself(tmp_path):
    from tests.conftest import REPO
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "gb200", "-k", "rank", "--collect-only", "-q",
                           "-p", "no:cacheprovider", f"--results-dir={tmp_path}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    ids = [ln.split("[", 1)[1].rstrip("]") for ln in done.stdout.splitlines() if ln.startswith("benchmarks/")]
    assert sorted(ids) == sorted([f"{a}-search" for a in GB200] + ["kimi-k3-gb200-rank"]), done.stdout
    assert ids[-1] == "kimi-k3-gb200-rank"                                 # after every arm
    # selecting a profile's points never starts a search or a ranking
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "local", "-k", "vllm", "--collect-only", "-q",
                           "-p", "no:cacheprovider", f"--results-dir={tmp_path}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert "rank" not in done.stdout.replace("deselected", "") and "-search]" not in done.stdout, done.stdout


def test_the_plan_of_a_ranking_is_its_arms_summed(catalog):
    arms = catalog.ranking("kimi-k3-gb200").arms
    each = [estimate(p) for p in arms]
    total = ranking_estimate(each)
    assert all(abs(total["gpu_hours"][i] - sum(e["gpu_hours"][i] for e in each)) < 1e-9 for i in range(3))
    done = run_cli("plan", "kimi-k3-gb200")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ranking kimi-k3-gb200: 4 searches") and "  all arms: GPU-hours " in done.stdout
    assert all(f"  {a}: search" in done.stdout for a in GB200), done.stdout


RECORDED = REPO / "tests/data/rank-local-cpu"


def test_the_recorded_local_ranking_ranks_vllm_over_dynamo_by_the_same_limits():
    from rackbench.report import rank
    from rackbench.results.files import stored_searches
    answers = {a["profile"]: a for a in stored_searches(RECORDED)}
    ref, other = answers[LOCAL[0]], answers[LOCAL[1]]
    assert other["limits"] == ref["limits"] and other["relative"]["from"] == LOCAL[0] and "from" not in ref["relative"]
    arms = rank.load([RECORDED])
    (tier,) = rank.ranking(arms)
    (verdict,) = tier["pairs"]
    assert tier["order"] == LOCAL and verdict["verdict"] == "better" and 1 < verdict["interval"][0]
    assert verdict["ratio"] == pytest.approx(313.1 / 176.1, rel=1e-3)
    stored = json.loads((RECORDED / "rankings/local-cpu.json").read_text())
    assert stored["text"] == rank.text(arms, [tier])
    assert [a.profile for a in rank.load([RECORDED], only={LOCAL[1]})] == [LOCAL[1]]   # one arm, its point alone          # the stored ranking is the one its folder gives


def test_the_plan_of_the_recorded_ranking_held_what_its_arms_spent(catalog):
    from rackbench.report import gpuhours, rank
    from rackbench.results.files import load_points
    points, _ = load_points(RECORDED)
    held = gpuhours.by_profile(gpuhours.of_folder(RECORDED, points)[0])
    said = rank.section(RECORDED, held)
    assert "tiny-llama-cpu-vllm_rank against tiny-llama-cpu-dynamo_rank: better: x1.78" in said
    assert "The plan said 0.08-0.45 GPU-hours (median 0.34); its arms' allocations held 0.31 (inside that range)." \
        in said, said
    # the plan the catalog gives today is the one the run stored
    plan = ranking_estimate([estimate(p) for p in catalog.ranking("local-cpu").arms])
    assert plan["gpu_hours"] == pytest.approx(json.loads((RECORDED / "rankings/local-cpu.json").read_text())[
        "plan"]["gpu_hours"])


def test_the_terminal_summary_says_the_ranking_and_a_torn_file_in_one_line(tmp_path):
    import shutil
    from rackbench.report.rank import terminal_lines
    lines = terminal_lines(RECORDED)
    assert lines[0].startswith("ranking local-cpu (") and lines[-1].endswith("better: x1.78 [x1.63, x1.85] "
                                                                               "(at least 90%)"), lines
    shutil.copytree(RECORDED / "rankings", tmp_path / "rankings")
    (tmp_path / "rankings" / "torn.json").write_text('{"ranking": ')
    assert [ln for ln in terminal_lines(tmp_path) if "torn" in ln][0].startswith("ranking torn: not read: ")


def test_the_same_deployment_on_another_trace_is_not_ranked_and_says_why():
    """Recorded: the vLLM arm searched again with the trace's seed 43 (tests/data/rank-local-cpu-seed43)."""
    done = run_cli("rank", RECORDED, REPO / "tests/data/rank-local-cpu-seed43")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    refused = [ln for ln in lines if "(rank-local-cpu-seed43)" in ln and " against " in ln]
    assert len(refused) == 2 and all("cannot rank: their tiers differ" in ln and
                                     "load (its trace: sessions, seed, shape) differs" in ln for ln in refused), lines
    assert any(ln.endswith("better: x1.78 [x1.63, x1.85] (at least 90%)") for ln in lines)   # the pair that ranks


def test_the_second_recorded_ranking_turned_over_at_a_looser_tier_and_its_plan_held_it(catalog):
    """tests/data/rank-local-cpu-2: the same ranking from a fresh clone, TTFT 10x: Dynamo better; the plan held."""
    from rackbench.report import gpuhours, rank
    from rackbench.results.files import load_points
    again = REPO / "tests/data/rank-local-cpu-2"
    (tier,) = rank.ranking(rank.load([again]))
    (verdict,) = tier["pairs"]
    assert tier["order"] == [LOCAL[1], LOCAL[0]] and verdict["verdict"] == "better" and verdict["interval"][0] > 1
    first = json.loads((RECORDED / "searches" / f"{LOCAL[0]}.json").read_text())
    second = json.loads((again / "searches" / f"{LOCAL[0]}.json").read_text())
    assert second["limits"]["ttft_ms"] > 1.9 * first["limits"]["ttft_ms"]          # a looser tier: 10x, not 5x
    points, _ = load_points(again)
    said = rank.section(again, gpuhours.by_profile(gpuhours.of_folder(again, points)[0]))
    assert "its arms' allocations held 0.34 (inside that range)." in said, said
