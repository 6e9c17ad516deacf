"""Capacity model: the shipped profiles fit, the seed's TP2 x DP8 does not, public models reproduce their
published KV bytes per token, and the verdict behaves monotonically (hypothesis)."""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackbench.catalog.capacity import GIB, estimate
from rackbench.catalog.loader import load_models
from rackbench.core.errors import ConfigError
from rackbench.catalog.loader import Catalog
from tests.conftest import REPO, edit, run_cli



@pytest.fixture(scope="module")
def models():
    return load_models(REPO / "recipes")


def gb200(catalog):
    return [p for p in catalog.profiles if p.cluster.name == "gb200-nv"]


def test_the_four_gb200_profiles_fit(catalog):
    for p in gb200(catalog):
        est = estimate(p)
        assert est.fits, (p.id, est.problems)
        assert est.load_peak < est.hbm and est.kv_tokens >= 1_048_576     # one native 1M-context request


def tp2_dp8(recipes):
    dep = recipes / "kimi-k3/gb200/dep.yaml"
    edit(dep, "layout: {tp: 4, dp: 4, ep: 16}", "layout: {tp: 2, dp: 8, ep: 16}")
    edit(dep, "tensor-parallel-size: 4", "tensor-parallel-size: 2")
    edit(dep, "data-parallel-size: 4", "data-parallel-size: 8")
    return recipes


@pytest.mark.catalog("kimi-k3")
def test_seed_tp2_dp8_overflows_at_weight_load_and_fails_collection(recipes):
    with pytest.raises(ConfigError) as err:
        Catalog.load(tp2_dp8(recipes))
    text = str(err.value)
    assert "dep.yaml" in text and "tensor-parallel-size: does not fit on gb200-nv: weight loading needs" in text
    assert "> 185 GiB HBM" in text


@pytest.mark.catalog("kimi-k3")
def test_tp2_dp8_and_tp4_dp4_differ_only_in_non_expert_weights(recipes, catalog):
    bad = next(p for p in Catalog.load(tp2_dp8(recipes), skip_rules={"capacity"}).profiles
               if p.id == "kimi-k3-gb200-dep")
    good = next(p for p in catalog.profiles if p.id == "kimi-k3-gb200-dep")
    b, g = estimate(bad), estimate(good)
    assert b.weights_detail["experts"] == g.weights_detail["experts"]          # EP16 both ways
    assert b.weights_detail["non_expert"] == pytest.approx(2 * g.weights_detail["non_expert"])
    assert g.load_peak <= g.hbm < b.load_peak
    assert not b.fits and g.fits


def test_deepseek_v3_mla_kv_bytes_per_token(models):
    # published: 61 layers x (512 latent + 64 rope) x 2 B = 70,272 B per token, the same on every TP rank
    m = models["deepseek-v3"]
    assert m.kv_bytes_per_token(2.0) == 70_272
    assert m.kv_bytes_per_token(2.0, tp=8) == 70_272
    assert m.kv_bytes_per_token(1.0) == 35_136                                  # fp8 KV cache


def test_llama3_70b_gqa_kv_bytes_per_token(models):
    # published: 80 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 327,680 B = 320 KiB per token
    m = models["llama-3-70b"]
    assert m.kv_bytes_per_token(2.0) == 327_680
    assert m.kv_bytes_per_token(2.0, tp=8) == 327_680 / 8
    assert m.kv_bytes_per_token(2.0, tp=16) == 327_680 / 8                     # heads replicate past TP 8


@pytest.mark.catalog("local")
def test_every_number_cites_a_source_or_an_estimate(recipes):
    edit(recipes / "models/llama-3-70b.yaml", 'layers: {value: 80, source: "config.json num_hidden_layers 80"}',
         "layers: {value: 80}")
    with pytest.raises(ConfigError, match="llama-3-70b.yaml.*layers.*source, or an estimate"):
        Catalog.load(recipes)


def test_kimi_checkpoint_size_is_reproduced(models):
    m = models["kimi-k3"]
    total = m.non_expert_params.value * 2 + m.expert_params_value * 0.53125
    assert total == pytest.approx(1.5e12)


@pytest.mark.catalog("kimi-k3")
def test_cli_exit_codes(repo, recipes):
    ok = run_cli("capacity", cwd=repo)
    assert ok.returncode == 0, ok.stderr
    assert "kimi-k3-gb200-dep_offload" in ok.stdout and "DOES NOT FIT" not in ok.stdout
    bad = run_cli("--recipes", tp2_dp8(recipes), "capacity", "dep", cwd=repo)
    assert bad.returncode == 1 and "TP2 x DP8 (EP16)" in bad.stdout and "DOES NOT FIT" in bad.stdout


# ---- monotonicity (hypothesis) ----

TPS = st.sampled_from([1, 2, 4, 8, 16])
DPS = st.sampled_from([1, 2, 4, 8])
GMU = st.floats(min_value=0.5, max_value=0.98)


def fits(p, tp, dp, gmu, ep=True):
    return estimate(p, gmu, {"tensor-parallel-size": tp, "data-parallel-size": dp,
                                           "enable-expert-parallel": ep}).fits


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["kimi-k3-gb200-dep", "kimi-k3-gb200-tep", "kimi-k3-gb200-dep_offload"]),
       tp=TPS, dp=DPS, gmu=GMU, ep=st.booleans(), grow=st.sampled_from(["tp", "dp"]))
def test_adding_gpus_never_breaks_a_fitting_layout(catalog, name, tp, dp, gmu, ep, grow):
    p = next(x for x in catalog.profiles if x.id == name)
    if fits(p, tp, dp, gmu, ep):
        bigger = (tp * 2, dp) if grow == "tp" else (tp, dp * 2)
        assert fits(p, *bigger, gmu, ep), (tp, dp, "->", bigger)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["kimi-k3-gb200-dep", "kimi-k3-gb200-tp", "tiny-llama-cpu-vllm"]),
       tp=TPS, dp=DPS, a=GMU, b=GMU)
def test_verdict_is_monotone_in_gpu_memory_utilization(catalog, name, tp, dp, a, b):
    p = next(x for x in catalog.profiles if x.id == name)
    lo, hi = min(a, b), max(a, b)
    if fits(p, tp, dp, lo):
        assert fits(p, tp, dp, hi)
    assert estimate(p, hi).kv_pool >= estimate(p, lo).kv_pool - 1e-6 * GIB


# ---- one reading of the flags for rules and capacity (bugs where the two had drifted) ----

GIB_INT = 2**30
OFFLOAD_JSON = ('{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both","kv_connector_extra_config":'
                '{"cpu_bytes_to_use":549755813888,"cpu_bytes_to_use_per_rank":137438953472,"lazy_offload":false}}')


def offload_only_total(recipes, total_gib: int):
    """dep_offload with only cpu_bytes_to_use (server-wide), as users of vLLM's connector often write it."""
    edit(recipes / "kimi-k3/gb200/dep_offload.yaml", OFFLOAD_JSON,
         '{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both","kv_connector_extra_config":'
         f'{{"cpu_bytes_to_use":{total_gib * GIB_INT},"lazy_offload":false}}}}')
    return recipes


@pytest.mark.catalog("kimi-k3")
def test_cpu_bytes_to_use_is_split_over_the_engines_tp_ranks(recipes):
    """vLLM's SimpleCPUOffloadConnector divides cpu_bytes_to_use by the engine's world size (TP x PP = 4 here),
    not by every GPU of the layout (16) and not by nothing: 512 GiB -> 128 GiB per rank, 4 ranks per node,
    512 GiB per node, which fits the node's 512.4 GiB budget. Before, the capacity model took 512 GiB per rank
    (2 TiB per node: a false 'does not fit')."""
    p = next(p for p in Catalog.load(offload_only_total(recipes, 512)).profiles if p.name == "dep_offload")
    assert p.flags.offload.bytes_per_rank == 128 * GIB_INT
    est = estimate(p)
    assert est.dram_pool_per_node == 512 * GIB_INT and est.fits, est.problems


@pytest.mark.catalog("kimi-k3")
def test_an_oversized_server_wide_pool_fails_rule_and_capacity_alike(recipes):
    """1 TiB server-wide = 256 GiB per rank = 1 TiB per node > 512 GiB. Before, the rule divided by 16 GPUs
    (64 GiB per rank, 'fits') while capacity said 4 TiB. Validation reports it once (rule offload-dram);
    `rackbench capacity` says the same numbers."""
    folder = offload_only_total(recipes, 1024)
    with pytest.raises(ConfigError) as err:
        Catalog.load(folder)
    text = str(err.value)
    assert "offload pool 256.0 GiB per rank (cpu_bytes_to_use / world size (TP x PP = 4))" in text
    assert "CPU KV pool" not in text
    p = next(p for p in Catalog.load(folder, skip_rules=("offload-dram",)).profiles if p.name == "dep_offload")
    assert estimate(p).dram_problems == ["CPU KV pool 4 ranks x 256 GiB = 1024 GiB per node > 860160 MiB x 0.61 = "
                                         "512 GiB"] and not estimate(p).fits


@pytest.mark.parametrize("flags, largest", [
    ({"cuda-graph-sizes": "8 16 32"}, 32),
    ({"cudagraph-capture-sizes": [4, 8, 64]}, 64),
    ({"compilation-config": '{"max_cudagraph_capture_size": 48}'}, 48),
    ({"compilation-config": {"cudagraph_capture_sizes": [2, 4, 96]}}, 96),
])
def test_capture_sizes_are_read_one_way_by_rules_and_capacity(catalog, flags, largest):
    """Before, capacity read only compilation-config's list and --cudagraph-capture-sizes, so --cuda-graph-sizes
    and max_cudagraph_capture_size fell back to vLLM's default (2 x max-num-seqs) in the memory model."""
    from rackbench.catalog.capacity import GRAPH_GIB_PER_128, GRAPH_REF_HIDDEN_X_LAYERS

    p = next(x for x in catalog.profiles if x.id == "kimi-k3-gb200-tep")
    drop = {"compilation-config": None} if "compilation-config" not in flags else {}
    est = estimate(p, overrides={**drop, **flags})
    assert p.flags.with_overrides({**drop, **flags}).capture.largest == largest
    scale = p.model.hidden_size.value * p.model.layers.value / GRAPH_REF_HIDDEN_X_LAYERS
    assert est.graphs == pytest.approx(GRAPH_GIB_PER_128 * GIB * largest / 128 * scale)
