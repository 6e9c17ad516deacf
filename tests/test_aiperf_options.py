"""Every AIPerf option of a point is a documented function of a recipe key, with the seed harness's values as the
GB200 defaults (docs/load.md: AIPerf options), and no point can reuse another point's prefix cache in dataset mode."""

import json
import shlex
import subprocess

import pytest

from rackbench.load.aiperf import OPTIONS
from tests.conftest import REPO, by_id, edit, run_cli
from tests.test_validation import problems

GB200 = ("kimi-k3-gb200-tp", "kimi-k3-gb200-tep", "kimi-k3-gb200-dep", "kimi-k3-gb200-dep_offload")


def rendered(case: str) -> list[str]:
    res = run_cli("render", case, cwd=REPO)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    argv = shlex.split(lines[lines.index(next(ln for ln in lines if ln.startswith("# aiperf for"))) + 1])
    return argv[argv.index("profile") - 1:]             # [aiperf, profile, ...] whatever the client's interpreter


def options(argv: list[str]) -> dict[str, str | None]:
    out, i = {}, 2
    while i < len(argv):
        flag = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
        out.setdefault(flag, value)
        i += 2 if value is not None else 1
    return out


@pytest.mark.parametrize("case", ["kimi-k3-gb200-tp-c8", "kimi-k3-gb200-dep_offload-c384"])
def test_a_gb200_point_runs_the_seeds_aiperf_settings(case):
    opts = options(rendered(case))
    documented = {flag for flag, _, _ in OPTIONS}
    assert set(opts) <= documented, set(opts) - documented
    assert opts["--public-dataset"] == "semianalysis_cc_traces_weka_062126"
    assert opts["--num-dataset-entries"] == "393"                    # c384 exercises 384 distinct trajectories
    assert opts["--cache-bust"] == "first-turn-prefix"
    assert opts["--system-idle-gap-cap-seconds"] == "10" and opts["--trace-idle-gap-cap-seconds"] == "300"
    assert (opts["--trajectory-start-min-ratio"], opts["--trajectory-start-max-ratio"]) == ("0.25", "0.75")
    assert opts["--agentic-warmup-grace-period"] == ("3600" if "dep" in case else "1800")
    assert "--benchmark-grace-period" not in opts                     # the seed leaves AIPerf's default
    assert opts["--failed-request-threshold"] == ("0.25" if "-tp-" in case else "0.1")
    assert "--tokenizer-trust-remote-code" in opts and opts["--extra-inputs"] == "ignore_eos:true"
    assert "--burst-phase-starts" not in opts


def test_the_docs_table_lists_every_aiperf_option():
    """docs/load.md's table is generated from OPTIONS (tests/test_docs.py keeps it current): every option there."""
    section = (REPO / "docs/load.md").read_text().split("### AIPerf options", 1)[1]
    for flag, key, seed in OPTIONS:
        assert f"| `{flag}` | {key} |" in section, flag


@pytest.mark.catalog("kimi-k3")
def test_a_point_that_could_reuse_another_points_prefix_cache_is_refused(recipes):
    edit(recipes / "presets/seed-harness.yaml", "cache_bust: first-turn-prefix", "cache_bust: none")
    found = [p for p in problems(recipes) if p.key == "profile.load.cache_bust"]
    assert found and "rides on the prefix cache the earlier ones built" in found[0].message
    assert found[0].file.endswith("seed-harness.yaml")


@pytest.mark.catalog("kimi-k3")
def test_too_few_trajectories_for_the_largest_concurrency_is_refused(recipes):
    edit(recipes / "presets/seed-harness.yaml", "    dataset_entries: 393", "    dataset_entries: 300")
    found = [p for p in problems(recipes) if p.key == "profile.load.dataset_entries"]
    assert [p.message for p in found] == ["concurrency 384 needs 384 distinct trajectories, but AIPerf reads 300 of "
                                          "the corpus"]


@pytest.mark.catalog("kimi-k3")
def test_a_seed_recipes_benchmark_env_is_carried_over_or_refused(recipes):
    edit(recipes / "kimi-k3/gb200/base.yaml", "benchmark:\n  type: manual",
         "benchmark:\n  type: manual\n  env:\n    AGENTIC_WARMUP_GRACE_PERIOD: \"3600\"\n"
         "    AIPERF_TRACE_IDLE_GAP_CAP_SECONDS: \"300\"\n    RESULT_DIR: /logs/agentic")
    found = [p for p in problems(recipes) if "benchmark.env" in p.key]
    # dep/dep_offload already use 3600; tp/tep use 1800: each is told, naming the profile key to set
    assert sorted({(p.key, p.fix) for p in found}) == [
        ("benchmark.env.AGENTIC_WARMUP_GRACE_PERIOD", "set profile.load.warmup_grace_s: 3600")]
    assert len(found) == 1           # tp and tep get the same line (problems are listed once)


@pytest.mark.local
def test_aiperfs_own_parser_and_planner_accept_every_gb200_command(tmp_path):
    aiperf_python = REPO / ".venvs/aiperf/bin/python"
    if not aiperf_python.exists():
        pytest.skip("AIPerf is not installed: run scripts/install-servers")
    from rackbench.catalog.loader import Catalog
    cat = Catalog.load(REPO / "recipes")
    reqs = [{"id": p.case_id(c), "args": rendered(p.case_id(c))[2:]} for pid in GB200
            for p in [by_id(cat, pid)] for c in p.spec.concurrency]
    (tmp_path / "req.json").write_text(json.dumps(reqs))
    out = subprocess.run([str(aiperf_python), str(REPO / "rackbench/tools/aiperf_check.py"), str(tmp_path / "req.json")],
                         capture_output=True, text=True, timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    answers = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(answers) == 18 and all(a["ok"] for a in answers), [a for a in answers if not a["ok"]]
    bad = [{"id": "bogus", "args": [*reqs[0]["args"], "--cache-bust", "bogus"]}]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    out = subprocess.run([str(aiperf_python), str(REPO / "rackbench/tools/aiperf_check.py"), str(tmp_path / "bad.json")],
                         capture_output=True, text=True, timeout=120, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert json.loads(out.stdout.strip().splitlines()[-1])[0]["ok"] is False


@pytest.mark.local          # AIPerf's own interpreter (.venvs/aiperf), a real component
@pytest.mark.parametrize("args, parsed", [(None, False), (["--model", "m", "--url", "http://x", "--cache-bust"], True)])
def test_the_client_check_parses_the_command_it_is_given_and_not_its_own(tmp_path, args, parsed):
    """A point that reads its own trace has no command to parse before it runs (args null): the check says so
    instead of handing cyclopts nothing, which parses the check's own argv (on the H200 every point was refused:
    'Parameter --cli-config requires an argument'). A command it is given is still parsed and a bad one refused."""
    aiperf_python = REPO / ".venvs/aiperf/bin/python"
    if not aiperf_python.exists():
        pytest.skip("AIPerf is not installed: run scripts/install-servers")
    req = {"node": "n0", "args": args, "tokenizer": "t", "model": str(tmp_path / "absent"), "cache": str(tmp_path)}
    out = subprocess.run([str(aiperf_python), str(REPO / "rackbench/tools/client_check.py"), json.dumps(req)],
                         capture_output=True, text=True, timeout=120, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    commands = [p for p in answer["problems"] if p["check"] == "aiperf command"]
    if parsed:
        assert len(commands) == 1 and "does not parse" in commands[0]["message"], answer
    else:
        assert commands == [] and any("parsed when the point runs" in n for n in answer["notes"]), answer
