"""#57 item 2: `rackbench rank` ranks deployments by what each serves per GPU within a tier, from their searches, or
refuses with the reason: the same profile searched on an H100 and an H200 is not a ranking of deployments."""

from rackbench.report.rank import Arm, pair
from tests.conftest import REPO, run_cli

SAME = (("GPU", "NVIDIA H100 80GB HBM3"), ("image", "vllm:0.26"), ("load (its trace: sessions, seed, shape)", "f1"),
        ("model", "m/7b"))


def arm(name, good, low, high, traits=SAME, goal="interactive at 0.9", void=()):
    return Arm(name, "interactive", goal, 16, good, low, high, traits, void)


def test_a_pair_is_ranked_only_where_its_intervals_part():
    a, b, c = arm("tp1", 900.0, 850.0, 930.0), arm("tp2", 700.0, 650.0, 760.0), arm("tp3", 880.0, 800.0, 920.0)
    ab = pair(a, b)
    assert ab["verdict"] == "better" and abs(ab["ratio"] - 900 / 700) < 1e-12
    assert abs(ab["interval"][0] - 850 / 760) < 1e-12 and abs(ab["interval"][1] - 930 / 650) < 1e-12
    assert pair(b, a)["verdict"] == "worse" and pair(a, c)["verdict"] == "within noise"


def test_arms_that_differ_in_more_than_the_deployment_are_not_ranked_and_say_why():
    other = tuple((k, "m/70b" if k == "model" else v) for k, v in SAME)
    said = pair(arm("a", 900.0, 850.0, 930.0), arm("b", 700.0, 650.0, 760.0, traits=other))
    assert said["verdict"] == "cannot rank" and said["why"] == ["model differs (m/7b against m/70b)"]
    said = pair(arm("a", 900.0, 850.0, 930.0), arm("b", 700.0, 650.0, 760.0, goal="strict at 0.99",
                                                    void=("b-c16 started on a warm prefix cache",)))
    assert said["verdict"] == "cannot rank" and len(said["why"]) == 2 and "tiers differ" in said["why"][0]


def test_the_same_search_on_two_cards_is_refused_naming_the_cards():
    done = run_cli("rank", REPO / "tests/data/h100-7b-search", REPO / "tests/data/h200-7b-search")
    assert done.returncode == 0, done.stderr
    assert "c20, 883.3 good output tok/s per GPU" in done.stdout
    assert "cannot rank: GPU differs (NVIDIA H100 80GB HBM3 against NVIDIA H200)" in done.stdout


def test_one_search_is_no_ranking(tmp_path):
    done = run_cli("rank", REPO / "tests/data/h100-7b-search")
    assert done.returncode == 1 and "a ranking needs two or more" in done.stderr


def test_a_folder_that_is_not_there_is_named_not_skipped(tmp_path):
    done = run_cli("rank", tmp_path / "nope", REPO / "tests/data/h100-7b-search")
    assert done.returncode == 2 and f"no results folder at {tmp_path / 'nope'}" in done.stderr, done.stderr
