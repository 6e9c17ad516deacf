"""#57 item 3: `rackbench plan PROFILE...` prices a grid or a search in GPU-hours from the recipe, before any node is
held; on the search that ran live on an H100 (tests/data/h100-7b-search) the range it states held what was spent."""

import json

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.report.plan import estimate
from rackbench.results.search import probe_counts
from tests.conftest import REPO, run_cli


def test_probe_counts_follow_the_rule_wherever_the_boundary_lies():
    # c1..c8, no tolerance: none met -> 1 probe; all met -> 1, 2, 4, 8; met up to 2 -> 1, 2, 4 and then 3
    counts = probe_counts(1, 8, 0.0, 12)
    assert counts[0] == 1 and counts[-1] == 4 and counts[2] == 4      # boundaries 0, 8 and 2
    assert max(probe_counts(4, 64, 0.25, 6)) == 6 and min(probe_counts(4, 64, 0.25, 6)) == 1


@pytest.mark.catalog("h200-7b")
def test_the_plan_of_the_h100_search_held_what_it_spent(recipes):
    prof = next(p for p in Catalog.load(recipes).profiles if p.id == "llama-7b-h200-vllm_search")
    e = estimate(prof)
    assert e["points"] == (1, 6, 6) and e["each_s"][0] == 30 and e["each_s"][2] == 120 + 60
    low, _, high = e["gpu_hours"]
    assert abs(low - 30 / 3600) < 1e-9 and abs(high - 6 * 180 / 3600) < 1e-9
    spent = json.loads((REPO / "tests/data/h100-7b-search/searches/llama-7b-h200-vllm_search.json").read_text())
    assert low <= spent["gpu_hours_measured"] <= high


def test_the_plan_command_prices_the_seeds_profiles_before_any_node_is_held():
    done = run_cli("plan", "kimi-k3-gb200-tp", "kimi-k3-gb200-dep_offload_search")
    assert done.returncode == 0, done.stderr
    assert "kimi-k3-gb200-tp: grid of 4 point(s), 16 GPU(s)" in done.stdout
    assert "kimi-k3-gb200-dep_offload_search: search, 1-6 probes" in done.stdout and "model load ~" in done.stdout


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`rackbench plan | head -1`: the pipe closes after one line; the command ends quietly (it printed a
    BrokenPipeError traceback)."""
    import shlex
    import subprocess
    import sys
    done = subprocess.run(f"set -o pipefail; {shlex.quote(sys.executable)} -m rackbench plan | head -1", shell=True, cwd=REPO,
                          capture_output=True, text=True, executable="/bin/bash", timeout=120)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
