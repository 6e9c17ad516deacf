"""srt-slurm recipes as users write them: real recipes of other models (srt-slurm v1.0.68, tests/data) load as
`extends:` targets; the ones rackbench does not run are set aside with one line each, and fields of a fork are
refused unless the catalog declares them."""

import shutil
from pathlib import Path

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.core.errors import ConfigError
from tests.conftest import REPO

SRT = Path(__file__).parent / "data" / "srt-slurm-v1.0.68"

CLUSTER = """\
name: {name}
kind: gpu
backend: slurm
gpu_type: {gpu}
nodes: 2
gpus_per_node: 8
hbm_gib_per_gpu: {hbm}
host_dram_mib_per_node: 2097152
dram_utilization: 0.5
"""
PROFILE = """\
extends: ../srt/{recipe}
profile:
  name: {name}
  model: {model}
  cluster: {cluster}
  concurrency: [{conc}]
  layout: {{tp: {tp}}}
  load: {{duration_s: 600, warmup_grace_s: 60}}     # a point fits the recipes' own job limits (30 min and up)
"""
RUNNABLE = {   # recipe -> (profile name, cluster, concurrency, tp)
    "vllm__nemotron-super-120b__b200-fp4__1k1k__agg-tp1.yaml": ("nemotron", "b200-8", 64, 1),
    "vllm__qwen3-32b__agg-round-robin.yaml": ("qwen32", "h100-8", 64, 2),
    "vllm__test__qwen3-0.6b-single-gpu.yaml": ("qwen06", "h100-8", 8, 1),
}


@pytest.fixture
def catalog_dir(tmp_path):
    root = tmp_path / "recipes"
    shutil.copytree(SRT, root / "srt", ignore=shutil.ignore_patterns("LICENSE", "*.md"))
    (root / "clusters").mkdir()
    (root / "clusters/h100-8.yaml").write_text(CLUSTER.format(name="h100-8", gpu="h100", hbm=80))
    (root / "clusters/b200-8.yaml").write_text(CLUSTER.format(name="b200-8", gpu="b200", hbm=180))
    (root / "models").mkdir()
    (root / "users").mkdir()
    for recipe, (name, cluster, conc, tp) in RUNNABLE.items():
        (root / "users" / f"{name}.yaml").write_text(PROFILE.format(recipe=recipe, name=name, model=name,
                                                                     cluster=cluster, conc=conc, tp=tp))
    return root


def test_real_srt_slurm_recipes_load_and_the_others_are_set_aside(catalog_dir):
    cat = Catalog.load(catalog_dir)
    assert sorted(p.name for p in cat.profiles) == ["nemotron", "qwen06", "qwen32"]
    skipped = {Path(f).name: why for f, why in cat.skipped.items()}
    assert sorted(skipped) == ["dsv4-pro__sglang__gb300-fp4__1k1k__agg__mtp__agg-low-latency.yaml",
                               "vllm__deepseek-r1__disagg-h100-16gpu.yaml"]
    assert skipped["dsv4-pro__sglang__gb300-fp4__1k1k__agg__mtp__agg-low-latency.yaml"].startswith(
        "a sglang recipe: rackbench runs aggregated vLLM workers")
    assert skipped["vllm__deepseek-r1__disagg-h100-16gpu.yaml"].startswith("disaggregated prefill/decode (resources.prefill_nodes)")
    assert all("\n" not in why for why in skipped.values())


def test_a_partial_node_job_counts_the_gpus_it_uses(catalog_dir):
    qwen06 = next(p for p in Catalog.load(catalog_dir).profiles if p.name == "qwen06")
    assert qwen06.recipe.resources.gpus_per_node == 8          # what the job requests per node
    assert qwen06.topology.gpus == 1                           # what results divide by
    qwen32 = next(p for p in Catalog.load(catalog_dir).profiles if p.name == "qwen32")
    assert qwen32.topology.gpus == 16 and len(qwen32.topology.roles) == 8


def test_notes_name_what_rackbench_does_not_run_and_which_flag_table_judged(catalog_dir):
    notes = Catalog.load(catalog_dir).notes()
    assert any("nemotron" in n and "model.path 'hf:nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4'" in n for n in notes)
    assert any("qwen32" in n and "benchmark.type 'mooncake-router'" in n for n in notes)
    assert any("qwen32" in n and "the recipe pins dynamo 0.8.0" in n for n in notes)    # dynamo.version: "0.8.0"
    assert any("not run: a sglang recipe" in n for n in notes)


def test_a_profile_of_a_recipe_rackbench_does_not_run_is_one_clear_line(catalog_dir):
    (catalog_dir / "users/sg.yaml").write_text(PROFILE.format(
        recipe="dsv4-pro__sglang__gb300-fp4__1k1k__agg__mtp__agg-low-latency.yaml", name="sg", model="sg",
        cluster="h100-8", conc=8, tp=4))
    with pytest.raises(ConfigError) as err:
        Catalog.load(catalog_dir)
    mine = [p for p in err.value.problems if p.file.endswith("agg-low-latency.yaml")]
    assert len(mine) == 1 and mine[0].key == "backend.type" and "sglang workers are not run" in mine[0].message
    assert not any("unknown key" in p.message for p in err.value.problems)


def test_a_fork_field_is_refused_unless_the_catalog_declares_the_fork(catalog_dir):
    recipe = catalog_dir / "srt/vllm__qwen3-32b__agg-round-robin.yaml"
    recipe.write_text(recipe.read_text().replace('  type: "mooncake-router"',
                                                 '  type: "mooncake-router"\n  aiperf_server_metrics: true'))
    with pytest.raises(ConfigError) as err:
        Catalog.load(catalog_dir)
    found = [p for p in err.value.problems if p.key == "benchmark.aiperf_server_metrics"]
    assert found and "not an srt-slurm v1.0.68 field" in found[0].message and "InferenceX" in found[0].message
    (catalog_dir / "catalog.yaml").write_text("srt_slurm: v1.0.68\nextensions: [benchmark.aiperf_server_metrics]\n")
    assert len(Catalog.load(catalog_dir).profiles) == 3


def test_the_shipped_catalog_declares_what_it_follows():
    cat = Catalog.load(REPO / "recipes")
    assert cat.declared.srt_slurm == "v1.0.68" and cat.declared.extensions == []


def test_srt_recipes_collect_as_cases_and_the_others_are_named_in_the_header(pytester, catalog_dir):
    from tests.conftest import copy_suite
    copy_suite(pytester.path)
    shutil.copytree(catalog_dir / "srt", pytester.path / "recipes/srt")
    shutil.copytree(catalog_dir / "users", pytester.path / "recipes/users")
    for name in ("h100-8.yaml", "b200-8.yaml"):
        shutil.copy(catalog_dir / "clusters" / name, pytester.path / "recipes/clusters" / name)
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "-m", "h100 or b200", "--collect-only", "-q",
                             "-p", "no:cacheprovider")
    cases = sorted(ln.split("[", 1)[1].rstrip("]") for ln in res.outlines if "::test_point[" in ln)
    assert cases == ["nemotron-b200-nemotron-c64", "qwen06-h100-qwen06-c8", "qwen32-h100-qwen32-c64"], res.outlines
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "-m", "h100", "-p", "no:cacheprovider")
    assert len([ln for ln in res.outlines if ln.startswith("rackbench: not run:")]) == 2
    res.stdout.fnmatch_lines(["rackbench: not run: *agg-low-latency.yaml: a sglang recipe: *"])
