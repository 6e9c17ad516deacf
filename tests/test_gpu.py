"""The GPU clusters without a scheduler (recipes/clusters/local-h200*.yaml): how processes split one host's GPUs,
which entrypoint a headless follower needs, why a case skips on a machine without the GPUs, which flag table
judges a recipe, and the generated models' numbers. What ran on real H200s is in tests/data/h200-*/ (test_results).
"""

import argparse
import json
from pathlib import Path

from servebench import flag_tables
from servebench.flag_rules import table_for
from servebench.models import GENERATED
from servebench.server.placement import dry_placement
from servebench.server.plan import plan
from servebench.tools.flag_table import types
from servebench import yamlio
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
    res.assert_outcomes(skipped=12)
    res.stdout.fnmatch_lines([
        "*llama-770m-h200-vllm: --cluster local-h200 given, but this machine shows 0 GPU(s) (nvidia-smi -L), 1 needed",
        "*moe-mini-h200-tp2_headless: needs cluster local-h200x2 (2 x H200 GPU(s) on this machine, no scheduler)*"])


def test_flag_table_follows_the_recipes_pins_and_says_when_it_cannot(catalog):
    table, note = table_for(by_id(catalog, "kimi-k3-gb200-dep"))
    assert table.name == "dynamo-1.6.1_vllm-0.31.0"
    assert note and "the recipe pins dynamo 1.3.0" in note and "servebench flag-table" in note
    table, note = table_for(by_id(catalog, "tiny-llama-cpu-dynamo"))
    assert (table.name, note) == ("dynamo-1.6.1_vllm-0.31.0", None)
    vllm026 = [n for n in flag_tables.available() if flag_tables.load(n).versions.get("vllm") == "0.26.0"]
    table, note = table_for(by_id(catalog, "llama-770m-h200-vllm"))
    if vllm026:     # recorded on the H200 (servebench flag-table there): the pinned version judges
        assert table.name in vllm026 and "the recipe's pinned versions" in note
    else:
        assert "pins vllm 0.26.0" in note


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
