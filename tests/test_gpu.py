"""The GPU clusters without a scheduler (recipes/clusters/local-h200*.yaml): how processes split one host's GPUs,
which entrypoint a headless follower needs, why a case skips on a machine without the GPUs, which flag table
judges a recipe, and the generated models' numbers. What ran on real H200s is in tests/data/h200-*/ (test_results).
"""

import argparse
import json
from pathlib import Path

import pytest

from rackbench.catalog.flag_rules import table_for
from rackbench.server.generated import GENERATED
from rackbench.server.assembly import dry_placement
from rackbench.server.plan import plan
from rackbench.tools.flag_table import types
from rackbench.core import yamlio
from tests.conftest import REPO, by_id, copy_suite, edit


def procs(profile):
    sp = plan(profile, dry_placement(profile))
    return sp, [p for p in sp.processes if p.role in ("worker", "headless")]


def test_tp2_runs_as_leader_and_headless_follower_one_gpu_each(catalog):
    sp, workers = procs(by_id(catalog, "moe-mini-h200-tp2_headless"))
    assert [(p.role, p.env["CUDA_VISIBLE_DEVICES"]) for p in workers] == [("worker", "0"), ("headless", "1")]
    leader, follower = (list(p.argv) for p in workers)
    assert leader[:2] == follower[:2] == ["/tmp/site/bin/vllm", "serve"]      # the CLI honours --headless
    assert "--headless" in follower and "--headless" not in leader
    for argv, rank in ((leader, "0"), (follower, "1")):
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == rank
    assert len(sp.engines) == 1 and sp.expected_instances == 1


def test_dp2_runs_one_process_per_rank_with_hybrid_load_balancing(catalog):
    sp, workers = procs(by_id(catalog, "moe-mini-h200-dp2_hybrid"))
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in workers] == ["0", "1"]
    for rank, p in enumerate(workers):
        argv = list(p.argv)
        assert argv[argv.index("--data-parallel-start-rank") + 1] == str(rank)
        assert argv[argv.index("--data-parallel-size-local") + 1] == "1"
        assert "--data-parallel-hybrid-lb" in argv and "--enable-expert-parallel" in argv
    assert len(sp.engines) == 2 and sp.expected_instances == 2
    assert len(set(sp.metrics_urls)) == 2


def test_one_gpu_profile_pins_its_gpu_and_slurm_clusters_leave_it_to_slurm(catalog):
    _, workers = procs(by_id(catalog, "llama-770m-h200-vllm_offload"))
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in workers] == ["0"]
    _, gb200 = procs(by_id(catalog, "kimi-k3-gb200-dep"))
    assert not any("CUDA_VISIBLE_DEVICES" in p.env for p in gb200)


@pytest.mark.catalog("h200x2")
def test_a_headless_follower_under_the_api_server_module_is_refused(recipes):
    edit(recipes / "clusters/local-h200x2.yaml", "vllm_serve: [/tmp/site/bin/vllm, serve]",
         "vllm_serve: [python3, -m, vllm.entrypoints.openai.api_server]")
    from tests.test_validation import problems
    found = [p for p in problems(recipes) if "ignores --headless" in p.message]
    assert len(found) == 1 and found[0].file.endswith("h200x2/_sweep.yaml") and found[0].key == "profile.cluster"


def test_gpu_cases_skip_with_their_reason_without_the_gpus(pytester):
    copy_suite(pytester.path)
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "-m", "h200", "--cluster", "local-h200", "-rs",
                             "-p", "no:cacheprovider")
    res.assert_outcomes(skipped=20)
    res.stdout.fnmatch_lines([
        "*llama-770m-h200-vllm: --cluster local-h200 given, but this machine shows 0 GPU(s) (nvidia-smi -L), 1 needed",
        "*moe-mini-h200-tp2_headless: needs cluster local-h200x2 (2 x H200 GPU(s) on this machine, no scheduler)*"])


def test_flag_table_follows_the_recipes_pins_and_says_when_it_cannot(catalog):
    table, note = table_for(by_id(catalog, "kimi-k3-gb200-dep"))
    assert table.name == "dynamo-1.6.1_vllm-0.31.0"
    assert note and "the recipe pins dynamo 1.3.0" in note and "rackbench flag-table" in note
    table, note = table_for(by_id(catalog, "tiny-llama-cpu-dynamo"))
    assert (table.name, note) == ("dynamo-1.6.1_vllm-0.31.0", None)
    for pid in ("llama-770m-h200-vllm", "llama-770m-h200-dynamo", "moe-mini-h200-dp2_hybrid"):
        table, note = table_for(by_id(catalog, pid))       # written on the H200 by scripts/gpu-bench
        assert (table.name, note) == ("dynamo-1.4.0_vllm-0.26.0", None), pid
    assert table.versions["vllm"] == "0.26.0" and table.types["vllm serve"]["--kv-cache-memory-bytes"]["kind"] == "size"


def test_flag_table_records_the_kind_choices_and_arity_the_parser_converts_to():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int)
    ap.add_argument("--x", type=float)
    ap.add_argument("--on", action=argparse.BooleanOptionalAction)
    ap.add_argument("--flag", action="store_true")
    ap.add_argument("--mode", choices=["a", "b"])
    ap.add_argument("--sizes", type=int, nargs="+")
    ap.add_argument("--cfg", type=json.loads)
    got = types(ap)
    assert got["--n"] == {"kind": "int"} and got["--x"] == {"kind": "float"} and got["--on"] == {"kind": "bool"}
    assert got["--flag"] == {"kind": "flag"} and got["--mode"] == {"kind": "str", "choices": ["a", "b"]}
    assert got["--sizes"] == {"kind": "int", "nargs": "+"} and got["--cfg"] == {"kind": "json"}


def _args(alias):
    a = GENERATED[alias]
    return {a[i].lstrip("-"): int(a[i + 1]) for i in range(0, len(a), 2)}


def test_generated_models_match_their_descriptions():
    """recipes/models/<alias>.yaml states each generated model's numbers; they follow from the generator's args."""
    vocab = 8192
    for alias in ("llama-770m", "moe-mini"):
        a = _args(alias)
        spec = yamlio.plain(yamlio.load(REPO / f"recipes/models/{alias}.yaml"))
        h, layers, heads, kv = a["hidden"], a["layers"], a["heads"], a["kv-heads"]
        head_dim, inter, experts = h // heads, a.get("intermediate", 2 * h), a.get("experts", 0)
        attn = 2 * h * heads * head_dim + 2 * h * kv * head_dim
        mlp = 3 * h * inter * max(experts, 1)
        router = h * experts
        total = layers * (attn + mlp + router + 2 * h) + vocab * h + h
        assert spec["total_params"]["value"] == total, alias
        assert spec["expert_params"]["value"] == (layers * mlp if experts else 0), alias
        assert spec["attention"]["kv_heads"]["value"] == kv and spec["attention"]["head_dim"]["value"] == head_dim
        assert spec["native_max_context"]["value"] == a["max-positions"] and spec["layers"]["value"] == layers


# ---- what ran on the H200 (2026-12-01, scripts/gpu-bench local-h200; tests/data/h200-gpu-run) ----

RUN = Path(__file__).parent / "data" / "h200-gpu-run"


def recorded():
    from rackbench.results import files
    return {p.stem: files.read(p) for p in sorted((RUN / "points").glob("*.json"))}


def test_every_recorded_h200_point_passed_with_a_valid_result():
    """Recorded with result schema 2: read today as schema 3, valid against the checked-in JSON Schema."""
    import json
    from rackbench.results import model, schema
    points = recorded()
    assert sorted(points) == ["llama-770m-h200-dynamo-c8", "llama-770m-h200-vllm-c32", "llama-770m-h200-vllm-c8",
                              "llama-770m-h200-vllm_offload-c32", "llama-770m-h200-vllm_offload-c8"]
    for case, r in points.items():
        assert schema.problems(model.upgrade(json.loads((RUN / "points" / f"{case}.json").read_text()))) == [], case
        assert r.verdict.passed and r.requests.errors == 0 and r.identity.gpus == 1, case
        assert r.identity.versions["vllm"] == "0.26.0" and r.identity.gpu_type == "h200", case
    assert points["llama-770m-h200-dynamo-c8"].identity.versions.get("dynamo") == "1.4.0"


def test_the_offload_arm_served_prompt_tokens_from_the_cpu_tier_and_the_base_arm_did_not():
    points = recorded()
    for c in (8, 32):
        off = points[f"llama-770m-h200-vllm_offload-c{c}"].server.prompt_token_shares
        base = points[f"llama-770m-h200-vllm-c{c}"].server.prompt_token_shares
        assert off.cpu_tier > 0.2 and base.cpu_tier == 0, c
        assert abs(off.local_cache + off.cpu_tier + off.computed - 1) < 1e-6
    assert points["llama-770m-h200-vllm_offload-c32"].server.prompt_token_shares.cpu_tier > \
        points["llama-770m-h200-vllm_offload-c8"].server.prompt_token_shares.cpu_tier     # more sessions, more spill


def test_recorded_points_judge_the_same_today(catalog):
    """The stored verdict is the one the current gates give (the client-bound check included: effective
    concurrency 5.8 of 8 passed, as the trace's think time predicts)."""
    from rackbench.results.verdict import judge
    for case, r in recorded().items():
        profile = by_id(catalog, case.rsplit("-c", 1)[0])
        again = judge(r, profile)
        later = {"own_server", "stall", "counters"}                  # checks added after the recordings: they pass on them too
        assert again.passed == r.verdict.passed
        assert [c.name for c in again.checks if c.name not in later] == [c.name for c in r.verdict.checks]
        assert all(c.ok for c in again.checks if c.name in later), case
        assert r.concurrency.trace_allowed and abs(r.concurrency.ratio_of_allowed - 1) < 0.1, case


def test_junit_carries_each_points_metrics_and_the_cpu_tier_share():
    """(The run's last case has none: the session was stopped by its time limit while that case's servers were
    being stopped, and pytest writes properties with the teardown report.)"""
    import xml.etree.ElementTree as ET
    cases = {tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")}
             for junit in ("junit-vllm.xml", "junit-dynamo.xml")
             for tc in ET.parse(RUN / junit).getroot().iter("testcase")}
    props = cases["test_point[llama-770m-h200-vllm_offload-c8]"]
    assert float(props["cpu_tier_hit_share"]) > 0.2 and float(props["output_tps_per_gpu"]) > 100
    assert cases["test_point[llama-770m-h200-dynamo-c8]"]["verdict"] == "passed"


@pytest.mark.install
def test_gpu_install_joins_checks_and_puts_rackbench_on_path(tmp_path):
    """scripts/gpu-install as a new user runs it, with this machine's Python and a wheelhouse of one small wheel
    that has a command of its own, cut into parts as for a capped transfer: the parts are joined, every wheel is
    checked against SHA256SUMS, and both commands (the wheel's and rackbench) are in TARGET/bin afterwards (a
    second pip call into the same --target used to skip bin/: no `rackbench`). A damaged part is refused."""
    import os
    import subprocess
    import sys
    src = tmp_path / "toy"
    (src / "toy").mkdir(parents=True)
    (src / "toy/__init__.py").write_text("def main():\n    print('toy ok')\n")
    (src / "pyproject.toml").write_text('[project]\nname = "toy"\nversion = "1.0"\n[project.scripts]\ntoy = "toy:main"\n'
                                        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    wh = tmp_path / "wh"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wh),
                    str(src)], check=True, capture_output=True)
    (whl,) = wh.glob("*.whl")
    (wh / "SHA256SUMS").write_text(subprocess.run(["sha256sum", "--", whl.name], cwd=wh, check=True,
                                                  capture_output=True, text=True).stdout)
    (wh / "parts").mkdir()
    subprocess.run(["split", "-b", "700", "-d", whl.name, f"parts/{whl.name}.part"], cwd=wh, check=True)
    whl.unlink()
    env = {**os.environ, "PYTHON": sys.executable, "RACKBENCH_COMMIT": "test"}
    target = tmp_path / "site"
    done = subprocess.run([str(REPO / "scripts/gpu-install"), str(wh), str(target)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (target / "bin/toy").is_file() and (target / "bin/rackbench").is_file()
    run = subprocess.run([str(target / "bin/rackbench"), "--help"], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(target)})
    assert run.returncode == 0 and run.stdout.startswith("usage: rackbench")
    part = next((wh / "parts").iterdir())
    part.write_bytes(b"x" + part.read_bytes()[1:])
    bad = subprocess.run([str(REPO / "scripts/gpu-install"), str(wh), str(tmp_path / "site2")], capture_output=True,
                         text=True, env=env, timeout=600)
    assert bad.returncode != 0 and "FAILED" in bad.stdout + bad.stderr
