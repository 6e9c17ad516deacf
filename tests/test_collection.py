"""The sweep as pytest cases, exercised as users type the commands (pytest subprocesses on a repo copy)."""


import pytest

from tests.conftest import copy_suite, edit


@pytest.fixture
def suite(pytester, repo):
    copy_suite(pytester.path)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_offline.py").write_text("def test_offline():\n    assert 1 + 1 == 2\n")
    return pytester


def ids(result):
    return [ln.split("[", 1)[1].rstrip("]") for ln in result.outlines if ln.startswith("benchmarks/") and "[" in ln]


def test_gb200_points(suite):
    res = suite.runpytest("--import-mode=importlib", "benchmarks", "-m", "gb200", "--collect-only", "-q")
    got = ids(res)
    assert len(got) == 18 and len(set(got)) == 18
    assert "kimi-k3-gb200-tp-c1" in got and "kimi-k3-gb200-dep-c256" in got


def test_offload_points_from_root(suite):
    for args in (["benchmarks"], []):
        res = suite.runpytest("--import-mode=importlib", *args, "-m", "gb200", "-k", "dep_offload", "--collect-only", "-q")
        assert ids(res) == [f"kimi-k3-gb200-dep_offload-c{c}" for c in (128, 192, 256, 384)], res.outlines


def test_cases_of_a_profile_are_contiguous(suite):
    res = suite.runpytest("--import-mode=importlib", "-m", "gb200", "--collect-only", "-q")
    profiles = [i.rsplit("-c", 1)[0] for i in ids(res)]
    runs = [p for i, p in enumerate(profiles) if i == 0 or p != profiles[i - 1]]
    assert sorted(runs) == sorted(set(profiles)), f"a profile's points are split: {runs}"


def test_not_hardware_runs_offline_tests_only(suite):
    res = suite.runpytest("--import-mode=importlib", "-m", "not hardware and not local", "-q")
    res.assert_outcomes(passed=1, deselected=56)   # 18 GB200 points, 20 H200, 8 local; 8 searches; 2 rankings


def test_hardware_case_without_cluster_skips_with_reason(suite):
    res = suite.runpytest("--import-mode=importlib", "-m", "gb200", "-rs", "-q")
    res.assert_outcomes(skipped=18)
    res.stdout.fnmatch_lines(["*SKIPPED*kimi-k3-gb200-dep_offload: needs cluster gb200-nv*--cluster gb200-nv*"])


def test_hardware_case_with_cluster_but_no_slurm_skips(suite, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # pytester runs the subprocess with sys.executable
    res = suite.runpytest("--import-mode=importlib", "-m", "gb200", "-k", "tp-c1", "-rs", "-q", "--cluster", "gb200-nv")
    res.assert_outcomes(skipped=1)
    res.stdout.fnmatch_lines(["*no Slurm client (sbatch) on PATH*"])


def test_markers_are_strict(suite):
    (suite.path / "tests" / "test_typo.py").write_text(
        "import pytest\n@pytest.mark.gb300\ndef test_x():\n    pass\n")
    res = suite.runpytest("--import-mode=importlib", "--collect-only", "-q")
    assert res.ret != 0
    res.stdout.fnmatch_lines(["*'gb300' not found in `markers` configuration option*"])


def test_broken_recipe_fails_collection_without_traceback(suite):
    edit(suite.path / "recipes/kimi-k3/gb200/dep.yaml", "        max-num-seqs: 64\n",
         "        max-num-seqs: 64\n        max-num-seqs: 32\n")
    res = suite.runpytest("--import-mode=importlib", "-m", "not hardware", "-q")
    assert res.ret == 2
    out = "\n".join(res.outlines)
    assert "recipes/kimi-k3/gb200/dep.yaml:" in out and "max-num-seqs: duplicate key" in out
    assert "Traceback" not in out and "site-packages" not in out
