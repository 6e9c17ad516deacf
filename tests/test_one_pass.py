"""A recipe's problems in one pass (#22): YAML, schema and rules together, each line saying who expands what and how
to fix it; seed recipes composed with the seed harness's settings; cluster files under the placeholder rule; hf:
model paths read as srtctl reads them."""

import shlex
import shutil
from pathlib import Path

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.core.errors import ConfigError
from tests.conftest import by_id, edit, run_cli

SEED = Path(__file__).parent / "data" / "seed-recipes" / "agg-gb200-tp16-latency-agentic.yaml"
PROFILE = """extends: [agg-gb200-tp16-latency-agentic.yaml, ../presets/seed-harness.yaml]
profile:
  name: seed_tp16
  model: kimi-k3
  cluster: gb200-nv
  concurrency: [1, 2, 4, 8]
  layout: {tp: 16}
  labels: {spec-decoding: none}
  gates: {live_error_rate: 0.25}
  allocations: fit
"""


def with_seed(recipes: Path, recipe_text: str | None = None, profile: str = PROFILE) -> Path:
    (recipes / "seed").mkdir()
    (recipes / "seed" / SEED.name).write_text(recipe_text if recipe_text is not None else SEED.read_text())
    (recipes / "seed" / "tp16.yaml").write_text(profile)
    return recipes


def fixed_seed() -> str:
    """The seed's recipe with the flaws the PR's later commits removed."""
    text = SEED.read_text()
    for old, new in [("      compilation-config: '{\"cudagraph_mode\":\"FULL_AND_PIECEWISE\"}'\n", ""),
                     ("      scheduler-cls: AsyncScheduler\n",
                      "      scheduler-cls: vllm.v1.core.sched.async_scheduler.AsyncScheduler\n"),
                     ("      tool-call-parser: kimi_k3\n", ""), ("  aiperf_server_metrics: true\n", ""),
                     ('    GLOO_SOCKET_IFNAME: "${IFACE}"\n    NCCL_SOCKET_IFNAME: "${IFACE}"\n', "    UCX_TLS: rc\n")]:
        assert old in text, old
        text = text.replace(old, new)
    return text


@pytest.mark.catalog("kimi-k3")
def test_the_seed_tp16_recipe_gives_all_its_problems_in_one_pass(recipes):
    """It took the seed three rounds (a duplicate key hid the schema, which hid the rules)."""
    with pytest.raises(ConfigError) as err:
        Catalog.load(with_seed(recipes))
    text = str(err.value)
    merged = """compilation-config: '{"cudagraph_mode":"FULL_AND_PIECEWISE","cudagraph_capture_sizes":[3,6,9,12,15,18,21,24]}'"""
    first, again = (i + 1 for i, ln in enumerate(SEED.read_text().splitlines()) if "compilation-config:" in ln)
    assert f"backend.vllm_config.aggregated.compilation-config: duplicate key (lines {first} and {again})" in text
    assert f"(fix: merge the two into one entry: {merged})" in text
    assert "benchmark.aiperf_server_metrics is not an srt-slurm v1.0.68 field" in text                 # schema
    assert "backend.aggregated_environment.GLOO_SOCKET_IFNAME: literal placeholder ${IFACE}" in text  # rules
    assert "--scheduler-cls 'AsyncScheduler' is not a dotted path" in text
    assert "--tool-call-parser is not accepted by Dynamo's vLLM worker" in text
    assert "Traceback" not in text


@pytest.mark.catalog("kimi-k3")
def test_placeholders_say_who_expands_what(recipes):
    base = recipes / "kimi-k3/gb200/base.yaml"
    edit(base, '  ETCD_LEASE_TTL: "7200"',
         '  ETCD_LEASE_TTL: "7200"\n  RANK_LOG: /logs/{node}\n  SHELLY: $HOME/x\n  ODD: /x/{nodename}')
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    lines = {ln.split(": ", 2)[1]: ln for ln in str(err.value).splitlines()}
    assert "srtctl fills it in worker environments; rackbench fills it only in the keys profile.templates lists" \
        in lines["environment.RANK_LOG"]
    assert "no shell reads this value" in lines["environment.SHELLY"]
    assert "neither srtctl nor rackbench fills it" in lines["environment.ODD"]


@pytest.mark.catalog("kimi-k3")
def test_a_cluster_files_placeholder_is_refused_naming_the_cluster_file(recipes):
    """It reached every process verbatim (render printed export NCCL_NVLS_ENABLE='${IFACE}')."""
    edit(recipes / "clusters/gb200-nv.yaml", "  environment:\n", "  environment:\n    NCCL_NVLS_ENABLE: ${IFACE}\n")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    line = next(i + 1 for i, ln in enumerate((recipes / "clusters/gb200-nv.yaml").read_text().splitlines())
                if "NCCL_NVLS_ENABLE" in ln)
    assert str(err.value).splitlines() == [
        f"{recipes / 'clusters/gb200-nv.yaml'}:{line}: runtime.environment.NCCL_NVLS_ENABLE: literal placeholder "
        "${IFACE} in '${IFACE}': no shell reads this value (rackbench passes it as it is written, and srtctl quotes "
        "it), so the process sees it verbatim; a cluster file's values reach every process as written (fix: write the "
        "value itself (an interface set to null is detected on each node))"]      # one line, not one per profile


@pytest.mark.catalog("local")
def test_an_hf_model_path_reaches_the_engine_as_srtctl_passes_it(recipes):
    edit(recipes / "local/base.yaml", "  path: tiny-llama", "  path: hf:Qwen/Qwen3-0.6B")
    cat = Catalog.load(recipes, skip_rules={"model-context"})
    res = run_cli("--recipes", str(recipes), "render", "tiny-llama-cpu-vllm")
    worker = next(ln for ln in res.stdout.splitlines() if "vllm.entrypoints.openai.api_server" in ln)
    argv = shlex.split(worker)
    assert argv[argv.index("--model") + 1] == "Qwen/Qwen3-0.6B"
    assert any("the engine gets the repo id 'Qwen/Qwen3-0.6B'" in n for n in cat.notes())


@pytest.mark.catalog("kimi-k3")
def test_a_seed_recipe_composed_with_the_seed_harness_renders_its_settings(recipes):
    cat = Catalog.load(with_seed(recipes, fixed_seed()))
    res = run_cli("--recipes", str(recipes), "render", "kimi-k3-gb200-seed_tp16-c8")
    argv = shlex.split(res.stdout.splitlines()[-1])
    flag = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert "--tokenizer-trust-remote-code" in argv and flag("--system-idle-gap-cap-seconds") == "10"
    assert (flag("--trajectory-start-min-ratio"), flag("--trajectory-start-max-ratio")) == ("0.25", "0.75")
    assert flag("--slice-duration") == "1" and flag("--num-dataset-entries") == "393"
    notes = [n for n in cat.notes() if n.startswith("kimi-k3-gb200-seed_tp16:")]
    assert any("the seed harness passed --warmup-requests-per-lane 10: AIPerf 0.13.0 has no such option" in n
               for n in notes), notes


@pytest.mark.catalog("kimi-k3")
def test_a_seed_recipe_alone_says_what_it_lacks(recipes):
    alone = PROFILE.replace("extends: [agg-gb200-tp16-latency-agentic.yaml, ../presets/seed-harness.yaml]",
                            "extends: agg-gb200-tp16-latency-agentic.yaml") + \
        "  load: {dataset: semianalysis_cc_traces_weka_062126}\n"
    cat = Catalog.load(with_seed(recipes, fixed_seed(), alone))
    prof = by_id(cat, "kimi-k3-gb200-seed_tp16")
    assert prof.spec.load.trajectory_start is None and not prof.spec.load.tokenizer_trust_remote_code
    assert any("load.dataset_entries unset: AIPerf reads 100 trajectories of semianalysis_cc_traces_weka_062126"
               in n for n in cat.notes())


@pytest.mark.catalog("kimi-k3")
def test_extends_lists_compose_in_order_and_blame_the_file_that_wrote_a_value(recipes):
    """A later layer overrides an earlier one; a problem names the layer that wrote the value."""
    edit(recipes / "presets/seed-harness.yaml", "    seed: 42", "    seed: 42\n    duration_s: 0")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    assert any(ln.startswith(str(recipes / "presets/seed-harness.yaml")) and "profile.load.duration_s" in ln
               for ln in str(err.value).splitlines())
    shutil.rmtree(recipes / "presets")
    with pytest.raises(ConfigError, match="seed-harness.yaml does not exist"):
        Catalog.load(recipes)


@pytest.mark.parametrize("old, new, key, placeholder", [
    ("    cache: /mnt/lustre01/users-public/sa-shared/rackbench/cache", "    cache: ${SCRATCH}/rackbench/cache",
     "runtime.client.cache", "${SCRATCH}"),
    ("  container_mounts:                      # more staged data every container sees (host -> inside)\n",
     "  container_mounts:\n    $HOME/models/extra: /models/extra\n", "runtime.container_mounts.$HOME/models/extra",
     "$HOME"),
])
@pytest.mark.catalog("kimi-k3")
def test_a_placeholder_in_a_cluster_files_path_is_refused_naming_the_key(recipes, old, new, key, placeholder):
    """`${VAR}` in a cluster's cache, mount or model paths passed silently and named a path no node has."""
    edit(recipes / "clusters/gb200-nv.yaml", old, new)
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    (line,) = [ln for ln in str(err.value).splitlines() if f": {key}: " in ln]
    assert line.startswith(str(recipes / "clusters/gb200-nv.yaml") + ":")
    assert f"literal placeholder {placeholder} in " in line and "(fix: write the path itself)" in line


@pytest.mark.catalog("kimi-k3")
def test_a_cluster_files_schema_error_and_its_placeholders_come_in_one_pass(recipes):
    """A misspelt key stopped the cluster file's check before its placeholders were looked at: a second run then
    found the ${SCRATCH} path. Both are said at once."""
    edit(recipes / "clusters/gb200-nv.yaml", "  pyxis: true\n", "  pyxis: true\n  partiton: batch\n")
    edit(recipes / "clusters/gb200-nv.yaml", "    cache: /mnt/lustre01/users-public/sa-shared/rackbench/cache",
         "    cache: ${SCRATCH}/rackbench/cache")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    text = str(err.value)
    assert "gb200-nv.yaml" in text and ": slurm.partiton: unknown key in cluster description" in text
    assert ": runtime.client.cache: literal placeholder ${SCRATCH} in " in text


def test_a_node_local_folder_keeps_its_node_placeholder(catalog):
    """slurm.node_local's {node} is the backend's to fill: not refused (the local Slurm's own cluster file uses it)."""
    assert any("{node}" in v for c in catalog.clusters.values() for v in c.slurm.node_local.values())


@pytest.mark.catalog("kimi-k3")
def test_a_broken_cluster_file_does_not_hide_its_profiles_rules(recipes):
    """A cluster file with a problem of its own set its profiles aside unchecked: a second run then found their
    rules' problems. Both come in one pass; what of the cluster file still parsed stands in for the rules."""
    edit(recipes / "clusters/gb200-nv.yaml", "  pyxis: true\n", "  pyxis: true\n  partiton: batch\n")
    edit(recipes / "kimi-k3/gb200/tep.yaml", "[8, 16, 24, 32]", "[8, 16, 16, 32]")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    text = str(err.value)
    assert "slurm.partiton: unknown key in cluster description" in text
    assert "duplicate concurrencies [16]" in text and "tep.yaml" in text
    assert "unknown cluster" not in text


@pytest.mark.catalog("kimi-k3")
def test_a_placeholder_in_the_model_path_or_a_mount_is_refused_naming_the_file_and_key(recipes):
    """#52 item 7: `${MODELS}` in model.path passed validation and reached the rendered command verbatim."""
    from tests.conftest import edit
    edit(recipes / "kimi-k3/gb200/base.yaml", "  path: kimi-k3", "  path: ${MODELS}/Kimi-K3")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    text = str(err.value)
    assert f"{recipes / 'kimi-k3/gb200/base.yaml'}:" in text and \
        "model.path: literal placeholder ${MODELS} in '${MODELS}/Kimi-K3'" in text, text
    assert "(fix: write the value itself" in text
