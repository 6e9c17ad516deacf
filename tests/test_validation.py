"""Each validation rule rejects a broken recipe with a message naming the file and the key.

The shipped catalog is the passing recipe for every rule (it exercises TP-only, EP, DP, offload,
spec decoding, CUDA-graph sizes and JSON flags); each case below breaks one thing in a copy of it.
"""

from pathlib import Path

import os

import pytest

from rackbench.core.errors import ConfigError
from rackbench.catalog.loader import Catalog
from tests.conftest import catalog_copy, edit, run_cli

G = "kimi-k3/gb200/"
OFF = "137438953472"


@pytest.fixture
def gb200(tmp_path: Path) -> Path:
    """A copy of the shipped catalog with only kimi-k3's profile folder (and the shared clusters, models, presets and
    configs): each load builds its 5 GB200 profiles, not all 22. A case below breaks one of them."""
    return catalog_copy(tmp_path / "recipes", "kimi-k3")


def problems(recipes: Path):
    try:
        Catalog.load(recipes)
    except ConfigError as err:
        return err.problems
    return []


def test_shipped_catalog_passes_every_rule(repo):
    assert problems(repo / "recipes") == []


CASES = [
    # id, file, old, new, message fragment, file blamed, key blamed
    ("duplicate-key-overlay", "dep.yaml", "        max-num-seqs: 64\n",
     "        max-num-seqs: 64\n        max-num-seqs: 32\n", "duplicate key", "dep.yaml",
     "recipe.backend.vllm_config.aggregated.max-num-seqs"),
    ("duplicate-key-base-top", "base.yaml", "setup_script:", "slurm: {}\nsetup_script:", "duplicate key",
     "base.yaml", "slurm"),
    ("unknown-key-base", "base.yaml", "  max_attempts: 2160", "  max_attempts: 2160\n  max_atempts: 5",
     "unknown key", "base.yaml", "health_check.max_atempts"),
    ("unknown-key-profile", "tp.yaml", "layout: {tp: 16, dp: 1, ep: 1}", "layout: {tp: 16, dp: 1, ep: 1, xp: 2}",
     "unknown key", "tp.yaml", "profile.layout.xp"),
    ("unknown-top-level", "tep.yaml", "extends: _agentx.yaml", "extends: _agentx.yaml\nbackend: {}",
     "unknown top-level key", "tep.yaml", "backend"),
    ("ep-wrong", "tep.yaml", "layout: {tp: 16, dp: 1, ep: 16}", "layout: {tp: 16, dp: 1, ep: 8}",
     "EP = TP x DP = 16", "tep.yaml", "profile.layout.ep"),
    ("ep-without-flag", "tp.yaml", "layout: {tp: 16, dp: 1, ep: 1}", "layout: {tp: 16, dp: 1, ep: 16}",
     "without --enable-expert-parallel", "tp.yaml", "profile.layout.ep"),
    ("layout-vs-flag", "dep.yaml", "data-parallel-size: 4", "data-parallel-size: 2",
     "--data-parallel-size 2 but profile.layout.dp is 4", "dep.yaml",
     "recipe.backend.vllm_config.aggregated.data-parallel-size"),
    ("gpu-count", "base.yaml", "  agg_nodes: 4\n  agg_workers: 1\n  gpus_per_agg: 16",
     "  agg_nodes: 2\n  agg_workers: 1\n  gpus_per_agg: 8", "uses TP x DP x PP = 16 GPUs, but a worker has 8",
     "dep.yaml", "profile.layout"),
    ("workers-x-gpus", "base.yaml", "  agg_nodes: 4", "  agg_nodes: 2", "1 workers x 16 GPUs != 2 nodes x 4 GPUs",
     "base.yaml", "resources.gpus_per_agg"),
    ("gpus-per-node", "base.yaml", "  gpus_per_node: 4", "  gpus_per_node: 8", "cluster gb200-nv has 4",
     "base.yaml", "resources.gpus_per_node"),
    ("concurrency-duplicate", "tep.yaml", "[8, 16, 24, 32]", "[8, 16, 16, 32]", "duplicate concurrencies [16]",
     "tep.yaml", "profile.concurrency"),
    ("concurrency-order", "tep.yaml", "[8, 16, 24, 32]", "[16, 8, 24, 32]", "must ascend", "tep.yaml",
     "profile.concurrency"),
    ("concurrency-positive", "tp.yaml", "[1, 2, 4, 8]", "[0, 2, 4, 8]", "must be > 0", "tp.yaml",
     "profile.concurrency"),
    ("batch-capacity", "dep_offload.yaml", "max-num-seqs: 96", "max-num-seqs: 64",
     "64 x DP 4 = 256 < largest concurrency 384", "dep_offload.yaml",
     "recipe.backend.vllm_config.aggregated.max-num-seqs"),
    ("cuda-graphs", "tp.yaml", "[3,6,9,12,15,18,21,24]", "[3,6,9,12]", "does not cover the per-engine batch of 24",
     "tp.yaml", "recipe.backend.vllm_config.aggregated.compilation-config"),
    ("json-flag-shape", "tp.yaml", '"cudagraph_capture_sizes":[3,6,9,12,15,18,21,24]', '"cudagraph_capture_sizes":64',
     "cudagraph_capture_sizes must be a list of whole numbers", "tp.yaml",
     "recipe.backend.vllm_config.aggregated.compilation-config"),
    ("int-flag", "dep.yaml", "max-num-seqs: 64", "max-num-seqs: lots", "--max-num-seqs takes a whole number",
     "dep.yaml", "recipe.backend.vllm_config.aggregated.max-num-seqs"),
    ("tp-zero", "dep.yaml", "tensor-parallel-size: 4", "tensor-parallel-size: 0", "--tensor-parallel-size must be >= 1",
     "dep.yaml", "recipe.backend.vllm_config.aggregated.tensor-parallel-size"),
    ("bare-class-name", "base.yaml", "scheduler-cls: vllm.v1.core.sched.async_scheduler.AsyncScheduler",
     "scheduler-cls: AsyncScheduler", "--scheduler-cls 'AsyncScheduler' is not a dotted path", "base.yaml",
     "backend.vllm_config.aggregated.scheduler-cls"),
    ("json-flag", "base.yaml", '"use_prefill_query_quantization":true}', '"use_prefill_query_quantization":true',
     "not valid JSON", "base.yaml", "backend.vllm_config.aggregated.attention-config"),
    # #52 item 7: enroot's root is read-only, so a Hub cache at a folder no mount provides fails its downloads
    ("cache-unmounted", "base.yaml", "HF_HUB_CACHE: /hf_hub_cache", "HF_HUB_CACHE: /root/.cache/hub",
     "HF_HUB_CACHE=/root/.cache/hub inside the container, but no mount", "base.yaml",
     "backend.aggregated_environment.HF_HUB_CACHE"),
    ("placeholder-dollar", "base.yaml", 'ETCD_LEASE_TTL: "7200"', 'ETCD_LEASE_TTL: "${LEASE_TTL}"',
     "literal placeholder ${LEASE_TTL}", "base.yaml", "environment.ETCD_LEASE_TTL"),
    ("placeholder-job-id", "base.yaml", "DG_JIT_CACHE_DIR: /tmp/deepgemm-jit-cache",
     "DG_JIT_CACHE_DIR: /tmp/{job_id}/dg", "literal placeholder {job_id}", "base.yaml",
     "backend.aggregated_environment.DG_JIT_CACHE_DIR"),
    ("placeholder-in-flag", "base.yaml", "served-model-name: moonshotai/Kimi-K3", "served-model-name: $MODEL",
     "literal placeholder $MODEL", "base.yaml", "backend.vllm_config.aggregated.served-model-name"),
    ("offload-dram", "dep_offload.yaml", OFF, str(2 * int(OFF)),
     "offload pool 256.0 GiB per rank (cpu_bytes_to_use_per_rank) x 4 ranks per node = 1024.0 GiB > gb200-nv DRAM "
     "860160 MiB x 0.61 = 512.4 GiB",
     "dep_offload.yaml", "recipe.backend.vllm_config.aggregated.kv-transfer-config"),
    ("connector-conflict", "dep_offload.yaml", "  backend:\n", "  backend:\n    connector: nixl\n",
     "also renders --kv-transfer-config", "dep_offload.yaml", "recipe.backend.connector"),
    ("offload-label", "dep_offload.yaml", "kv-offloading: dram", "kv-offloading: none",
     "labelled kv-offloading: none", "dep_offload.yaml", "profile.labels.kv-offloading"),
    ("unknown-cluster", "_agentx.yaml", "cluster: gb200-nv", "cluster: gb300-nv", "unknown cluster 'gb300-nv'",
     "_agentx.yaml", "profile.cluster"),
    ("live-gate", "tp.yaml", "live_error_rate: 0.25", "live_error_rate: 0.05", "stricter than the final gate",
     "tp.yaml", "profile.gates.live_error_rate"),
    ("identity", "base.yaml", "    image: vllm/vllm-openai:kimi-k3", "    image: vllm/vllm-openai:latest",
     "identity says 'vllm/vllm-openai:latest'", "base.yaml", "identity.container.image"),
    ("flag-choice", "base.yaml", "kv-cache-dtype: fp8", "kv-cache-dtype: fp9", "--kv-cache-dtype 'fp9' is not one "
     "of its choices", "base.yaml", "backend.vllm_config.aggregated.kv-cache-dtype"),
    ("flag-float", "dep.yaml", "gpu-memory-utilization: 0.94", "gpu-memory-utilization: most",
     "--gpu-memory-utilization takes a number", "dep.yaml", "recipe.backend.vllm_config.aggregated.gpu-memory-utilization"),
    ("flag-int-typed", "base.yaml", "      block-size: 64", "      block-size: 64.5", "--block-size takes a whole number",
     "base.yaml", "backend.vllm_config.aggregated.block-size"),
    ("flag-list-spread", "base.yaml", "      block-size: 64", "      block-size: [64, --trust-remote-code]",
     "--block-size takes one value, got a list", "base.yaml", "backend.vllm_config.aggregated.block-size"),
    ("flag-switch-value", "dep.yaml", "enable-expert-parallel: true", "enable-expert-parallel: yes-please",
     "--enable-expert-parallel is a switch", "dep.yaml", "recipe.backend.vllm_config.aggregated.enable-expert-parallel"),
    ("flag-true-for-value", "base.yaml", "served-model-name: moonshotai/Kimi-K3", "served-model-name: true",
     "`true` would render `--served-model-name` with no value", "base.yaml",
     "backend.vllm_config.aggregated.served-model-name"),
    ("flag-value-like-option", "base.yaml", "served-model-name: moonshotai/Kimi-K3",
     "served-model-name: --trust-remote-code", "starts with '-'", "base.yaml",
     "backend.vllm_config.aggregated.served-model-name"),
    ("context-too-long", "tp.yaml", "gpu-memory-utilization: 0.92", "gpu-memory-utilization: 0.92\n        "
     "max-model-len: 2M", "exceeds kimi-k3's native context", "tp.yaml",
     "recipe.backend.vllm_config.aggregated.max-model-len"),
    ("concurrency-huge", "tp.yaml", "[1, 2, 4, 8]", "[1, 2, 4, 8000000]", "concurrencies above 65536", "tp.yaml",
     "profile.concurrency"),
    ("attempts-bound", "base.yaml", "  max_attempts: 2160", "  max_attempts: 99999999999", "less than or equal to "
     "100000", "base.yaml", "health_check.max_attempts"),
    ("duration-bound", "../../presets/seed-harness.yaml", "duration_s: 3600", "duration_s: -5", "greater than 0",
     "../../presets/seed-harness.yaml", "profile.load.duration_s"),
    ("wrong-type", "base.yaml", "  max_attempts: 2160", "  max_attempts: lots", "valid integer", "base.yaml",
     "health_check.max_attempts"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule_rejects_broken_recipe(gb200, case):
    _, file, old, new, fragment, blamed_file, blamed_key = case
    edit(gb200 / G / file, old, new)
    found = problems(gb200)
    matching = [p for p in found if fragment in p.message]
    assert matching, f"no problem mentions {fragment!r}; got:\n" + "\n".join(map(str, found))
    prob = matching[0]
    assert os.path.normpath(prob.file).endswith(os.path.normpath(G + blamed_file)), str(prob)
    assert prob.key == blamed_key, str(prob)
    assert prob.fix, "every problem says how to fix it"
    assert str(prob).startswith(prob.file)


def test_declared_template_is_allowed(gb200):
    edit(gb200 / G / "base.yaml", "DG_JIT_CACHE_DIR: /tmp/deepgemm-jit-cache", "DG_JIT_CACHE_DIR: /tmp/{job_id}/dg")
    edit(gb200 / G / "_agentx.yaml", "  cluster: gb200-nv",
         "  cluster: gb200-nv\n  templates: [backend.aggregated_environment.DG_JIT_CACHE_DIR]")
    assert problems(gb200) == []


def test_declared_template_still_rejects_shell_variables(gb200):
    edit(gb200 / G / "base.yaml", "DG_JIT_CACHE_DIR: /tmp/deepgemm-jit-cache", "DG_JIT_CACHE_DIR: ${TMPDIR}/dg")
    edit(gb200 / G / "_agentx.yaml", "  cluster: gb200-nv",
         "  cluster: gb200-nv\n  templates: [backend.aggregated_environment.DG_JIT_CACHE_DIR]")
    assert any("rackbench does not fill" in p.message for p in problems(gb200))


def test_extends_cycle_and_missing_base(gb200):
    edit(gb200 / G / "_agentx.yaml", "extends: [base.yaml,", "extends: [tp.yaml,")
    assert any("extends itself" in p.message for p in problems(gb200))
    edit(gb200 / G / "_agentx.yaml", "extends: [tp.yaml,", "extends: [nowhere.yaml,")
    found = problems(gb200)
    assert any("nowhere.yaml does not exist" in p.message and p.key == "extends" for p in found)


@pytest.mark.parametrize("target, fragment", [
    ("../gb200/../gb200/tp.yaml", "extends itself: tp.yaml -> _agentx.yaml -> tp.yaml"),
    ("/etc/passwd", "is an absolute path"),
    ("../../../outside.yaml", "leaves the recipes folder"),
])
def test_extends_stays_in_the_catalog(gb200, target, fragment):
    (gb200.parent / "outside.yaml").write_text("slurm: {}\n")
    edit(gb200 / G / "_agentx.yaml", "extends: [base.yaml,", f"extends: [{target},")
    found = [p for p in problems(gb200) if fragment in p.message]
    lines = (gb200 / G / "_agentx.yaml").read_text().splitlines()
    assert found and all(p.key == "extends" and lines[p.line - 1].startswith("extends:") for p in found), \
        problems(gb200)


@pytest.mark.parametrize("text, fragment", [
    ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9)
                                              + "]\n" for i in range(8)), "aliases expand this document"),
    ("? [1, 2]\n: 3\n", "a mapping key is itself a list or mapping"),
    ("[" * 3000, "nest"),                                  # "nested too deeply" / libyaml's "maximum nesting depth"
    ("[" * 600 + "]" * 600, "nest"),
    ("x:\n  <<: {a: 1}\n  b: 1\n  b: 2\n", "duplicate key"),
])
def test_yaml_is_bounded(text, fragment):
    """An alias bomb is refused while parsing (before: it passed validation, then hung render and the fingerprint)."""
    from rackbench.core import yamlio
    with pytest.raises(ConfigError) as err:
        yamlio.parse(text, "x.yaml")
    assert fragment in str(err.value) and "Traceback" not in str(err.value)


def test_yaml_merge_keys_are_accepted(gb200):
    """`<<: *defaults` followed by an override is valid YAML: the override wins, no duplicate-key error."""
    edit(gb200 / G / "tp.yaml", "profile:\n  name: tp\n", "profile:\n  <<: {name: tq, stop_grace_s: 5}\n  name: tp\n")
    assert problems(gb200) == []
    tp = [p for p in Catalog.load(gb200).profiles if p.file.endswith("tp.yaml")][0]
    assert (tp.spec.name, tp.spec.stop_grace_s) == ("tp", 5)


def test_base_problem_reported_once(gb200):
    edit(gb200 / G / "base.yaml", "  max_attempts: 2160", "  max_attempts: 2160\n  max_atempts: 5")
    assert len(problems(gb200)) == 1


def test_all_problems_reported_at_once(gb200):
    edit(gb200 / G / "tep.yaml", "[8, 16, 24, 32]", "[16, 8, 24, 32]")
    edit(gb200 / G / "tp.yaml", "layout: {tp: 16, dp: 1, ep: 1}", "layout: {tp: 16, dp: 1, ep: 16}")
    files = {Path(p.file).name for p in problems(gb200)}
    assert {"tep.yaml", "tp.yaml"} <= files


def test_a_bad_flag_value_is_reported_once_without_traceback(gb200):
    """The flag views record what they cannot read; capacity and every other rule still run on vLLM's
    defaults instead of raising (before: a malformed compilation-config crashed the capacity rule)."""
    edit(gb200 / G / "tp.yaml", '"cudagraph_capture_sizes":[3,6,9,12,15,18,21,24]}', '"cudagraph_capture_sizes":[3,6')
    found = problems(gb200)
    assert [p.key for p in found] == ["recipe.backend.vllm_config.aggregated.compilation-config"], found
    assert "not valid JSON" in found[0].message


@pytest.mark.parametrize("file, old, new, key, fragment", [
    ("base.yaml", 'time_limit: "08:00:00"', 'time_limit: "08:00:00\\necho pwned"', "slurm.time_limit",
     "control character"),
    ("base.yaml", '  cpus-per-task: "144"', '  "cpus-per-task\\nrm -rf /": "144"', "sbatch_directives",
     "control character"),
    ("base.yaml", '  ETCD_LEASE_TTL: "7200"', '  ETCD_LEASE_TTL: "7200\\u0000x"', "environment.ETCD_LEASE_TTL",
     "control character"),
    ("base.yaml", '  ETCD_LEASE_TTL: "7200"', '  ETCD_LEASE_TTL: "7200"\n  "BAD NAME;id": "1"', "environment.BAD NAME;id",
     "is not an environment variable name"),
    ("base.yaml", '  container-remap-root: ""', '  container-remap-root: ""\n  nodelist: n9', "srun_options.nodelist",
     "--nodelist is set by rackbench on every step"),
    ("base.yaml", "  type: dynamo\n  enable_multiple_frontends", "  type: dynamoo\n  enable_multiple_frontends",
     "frontend.type", "no frontend 'dynamoo' is registered (known: dynamo, vllm"),
])
def test_nothing_a_recipe_says_can_run_as_a_command(gb200, file, old, new, key, fragment):
    edit(gb200 / G / file, old, new)
    found = problems(gb200)
    assert any(key in p.key and fragment in p.message for p in found), "\n".join(map(str, found))
    assert all(len(str(p).splitlines()) == 1 for p in found)        # one line each, control characters escaped


def test_changelog_check_outside_a_git_work_tree(tmp_path, repo):
    import shutil
    from tests.conftest import run_cli

    shutil.copytree(repo / "recipes", tmp_path / "recipes")
    shutil.copy(repo / "perf-changelog.yaml", tmp_path / "perf-changelog.yaml")
    res = run_cli("changelog", "check", "--base", "HEAD", cwd=tmp_path)
    assert res.returncode == 1 and "is not in a git work tree" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.catalog("local")
def test_an_advisory_rule_can_be_waived_on_purpose_with_a_reason(recipes):
    """A deliberately slowed run (max-num-seqs below the largest concurrency) loads only with a waiver that says
    why; the waiver is listed with every run and does not change the recipe fingerprint."""
    sweep = recipes / "local/_sweep.yaml"
    before = {p.id: p.fingerprint for p in Catalog.load(recipes).profiles}
    edit(recipes / "local/base.yaml", "      max-num-seqs: 16\n", "      max-num-seqs: 2\n")
    [prob] = [p for p in problems(recipes) if p.file.endswith("local/base.yaml")][:1]
    assert "max-num-seqs 2 x DP 1 = 2 < largest concurrency 4" in prob.message
    assert "profile.waive: {batch-capacity: <why>}" in prob.fix
    edit(sweep, "  gates:\n", "  waive:\n    batch-capacity: slowed on purpose to test compare\n  gates:\n")
    cat = Catalog.load(recipes)
    assert "tiny-llama-cpu-vllm: rule batch-capacity waived: slowed on purpose to test compare" in cat.notes()
    assert all(p.fingerprint != before[p.id] for p in cat.profiles if p.id.startswith("tiny-llama-cpu-"))
    edit(recipes / "local/base.yaml", "      max-num-seqs: 2\n", "      max-num-seqs: 16\n")
    assert {p.id: p.fingerprint for p in Catalog.load(recipes).profiles} == before   # the waiver alone: no change


@pytest.mark.parametrize("waiver, fragment", [
    ("capacity: it does not fit but run it anyway", "waive.capacity"),          # not an advisory rule
    ("batch-capacity: why", "waive.batch-capacity"),                            # no real reason
])
@pytest.mark.catalog("local")
def test_a_waiver_of_a_rule_that_cannot_be_waived_or_without_a_reason_is_refused(recipes, waiver, fragment):
    edit(recipes / "local/_sweep.yaml", "  gates:\n", f"  waive:\n    {waiver}\n  gates:\n")
    got = problems(recipes)
    assert got and any(fragment in (p.key or "") and p.file.endswith("local/_sweep.yaml") for p in got), got


def test_an_empty_recipes_folder_is_an_error_not_zero_valid_points(tmp_path):
    """A wrong --recipes (an empty folder, a typo'd copy) must not read as "every recipe is valid, 0 points"."""
    (tmp_path / "clusters").mkdir()
    res = run_cli("--recipes", tmp_path, "matrix")
    assert res.returncode == 1 and "no profile in this recipes folder" in res.stderr and "--recipes" in res.stderr


@pytest.mark.parametrize("line, expected", [
    ("      block-size: 0", "--block-size must be greater than 0, got 0 (vLLM refuses it at start-up)"),
    ("      max-num-seqs: 0", "--max-num-seqs must be >= 1, got 0"),
    ("      gpu-memory-utilization: 1.5", "--gpu-memory-utilization must be at most 1, got 1.5"),
    ("      compilation-config: {cudagraph_capture_sizes: \"8,16\"}",
     "cudagraph_capture_sizes must be a list of whole numbers, got '8,16'"),
    ("      compilation-config: {cudagraph_capture_sizes: [8, 16.5]}",
     "cudagraph_capture_sizes must be a list of whole numbers, got [8, 16.5]"),
    ("      compilation-config: {use_inductor_graph_partition: \"yes\"}",
     "--compilation-config use_inductor_graph_partition takes true or false, got 'yes'"),
    ("      compilation-config: '{\"cudagraph_capture_size\": [8]}'",
     "--compilation-config has no field 'cudagraph_capture_size' (CompilationConfig refuses unknown fields)"),
])
@pytest.mark.catalog("local")
def test_values_the_engine_refuses_at_start_are_refused_offline(recipes, line, expected):
    """Bounds and shapes read from vLLM's own config classes into the flag table (rackbench/tools/flag_table.py):
    a recipe that would stop at engine start-up, after the model has loaded, stops here, naming the flag."""
    edit(recipes / "local/base.yaml", "      max-num-seqs: 16", line if "max-num-seqs" in line else
         f"      max-num-seqs: 16\n{line}")
    found = [str(p) for p in problems(recipes)]
    assert any(expected in p and "base.yaml" in p for p in found), found


@pytest.mark.catalog("local")
def test_values_inside_the_engines_bounds_pass(recipes):
    edit(recipes / "local/base.yaml", "      max-num-seqs: 16",
         "      max-num-seqs: 16\n      block-size: 16\n      compilation-config: {cudagraph_capture_sizes: [1, 2, 4]}")
    assert problems(recipes) == []


@pytest.mark.parametrize("line, expected", [
    ("      block-size: 0", "--block-size must be greater than 0, got 0 (vLLM refuses it at start-up)"),
    ("      compilation-config: {cudagraph_capture_sizes: [8, 16.5]}",
     "cudagraph_capture_sizes must be a list of whole numbers, got [8, 16.5]"),
])
@pytest.mark.catalog("h200")
def test_the_h200_flag_table_has_vllm_0_26s_own_bounds(recipes, line, expected):
    """The H200 clusters' table (dynamo-1.4.0_vllm-0.26.0, written on the lent H200 by rackbench/tools/flag_table.py
    from vLLM 0.26.0's own config classes) refuses what that engine refuses, as the CPU table does for 0.31.0."""
    edit(recipes / "h200/base.yaml", "      max-num-seqs: 64", f"      max-num-seqs: 64\n{line}")
    found = [str(p) for p in problems(recipes)]
    assert any(expected in p and "h200/base.yaml" in p for p in found), found


def test_a_dram_overflow_is_one_problem_with_advice_that_fits_it(gb200):
    """An offload pool beyond the node's DRAM is rule offload-dram's alone: once, and its fix is the pool's size, not
    the capacity rule's GPU advice (more TP/EP, a lower max-model-len), which changes nothing on the host."""
    edit(gb200 / G / "dep_offload.yaml", OFF, str(2 * int(OFF)))
    dram = [p for p in problems(gb200) if "DRAM" in p.message or "CPU KV pool" in p.message]
    assert len(dram) == 1, [p.message for p in dram]
    assert dram[0].fix == "use at most 128 GiB per rank"


def test_a_text_parsed_again_is_a_copy_of_its_own_and_its_problems_name_its_own_file():
    """yamlio parses a text once (catalogs are loaded again and again): each caller still gets its own document, with
    its lines, and a duplicate key is named in the file it was read from."""
    from rackbench.core import yamlio
    text = "a:\n  b: [1, 2]\n  c: x\n"
    first, _ = yamlio.parse_lenient(text, "one.yaml")
    first["a"]["b"].append(3)
    second, problems = yamlio.parse_lenient(text, "two.yaml")
    assert second == {"a": {"b": [1, 2], "c": "x"}} and problems == []
    assert yamlio.line_of(second["a"], "c") == 3
    twice = "k: 1\nk: 2\n"
    assert [p.file for p in yamlio.parse_lenient(twice, "x.yaml")[1]] == ["x.yaml"]
    assert [p.file for p in yamlio.parse_lenient(twice, "y.yaml")[1]] == ["y.yaml"]
