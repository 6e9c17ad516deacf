"""The shipped Kimi K3 GB200 AgentX profiles carry the seed system's numbers."""

import json

import pytest

from rackbench.catalog.loader import Catalog
from tests.conftest import REPO, by_id

SEED = {
    # name: (concurrency, tp, dp, ep, max-num-seqs, gpu-memory-utilization, load-format)
    "tp": ([1, 2, 4, 8], 16, 1, 1, 8, 0.92, "fastsafetensors"),
    "tep": ([8, 16, 24, 32], 16, 1, 16, 32, 0.92, "fastsafetensors"),
    "dep": ([32, 64, 96, 128, 192, 256], 4, 4, 16, 64, 0.94, "safetensors"),
    "dep_offload": ([128, 192, 256, 384], 4, 4, 16, 96, 0.94, "safetensors"),
}


def gb200(catalog):
    """The GB200 grid (the seed's four profiles); dep_offload_search is beside it."""
    return [p for p in catalog.profiles if p.cluster.name == "gb200-nv" and p.spec.search is None]


def test_four_profiles_eighteen_points(catalog):
    assert sorted(p.name for p in gb200(catalog)) == sorted(SEED)
    assert sum(len(p.spec.concurrency) for p in gb200(catalog)) == 18


def test_local_profiles_mirror_the_gb200_stack(catalog):
    local = {p.name: p for p in catalog.profiles if p.cluster.name == "local-cpu"}
    assert sorted(local) == ["dynamo", "dynamo_offload", "dynamo_rank", "vllm", "vllm_rank", "vllm_search"]
    assert local["dynamo"].recipe.frontend.type == "dynamo" and local["vllm"].recipe.frontend.type == "vllm"
    # the ranking's arms: the same engine and load, the frontend the one difference
    assert local["dynamo_rank"].recipe.frontend.type == "dynamo" and local["vllm_rank"].recipe.frontend.type == "vllm"
    assert local["dynamo_rank"].load_fingerprint == local["vllm_rank"].load_fingerprint
    assert local["dynamo_offload"].offload and not local["dynamo"].offload


@pytest.mark.parametrize("name", sorted(SEED))
def test_profile_numbers(catalog, name):
    conc, tp, dp, ep, seqs, gmu, load_format = SEED[name]
    p = next(p for p in catalog.profiles if p.name == name)
    f = p.flags
    assert p.spec.concurrency == conc
    assert (p.spec.layout.tp, p.spec.layout.dp, p.spec.layout.ep) == (tp, dp, ep)
    assert p.spec.layout.gpus == 16
    assert (f.tp, f.dp, f.ep) == (tp, dp, ep) and f.max_num_seqs == seqs
    assert f.value("gpu-memory-utilization") == gmu
    assert f.value("load-format") == load_format
    assert p.recipe.model.container == "vllm/vllm-openai:kimi-k3"
    assert p.recipe.identity.frameworks == {"dynamo": "1.3.0"}
    assert p.recipe.dynamo.hash == "ba83080ecd31c1ce918559e576d3c5bc9e092ff1"
    assert (p.recipe.resources.agg_nodes, p.recipe.resources.gpus_per_node) == (4, 4)
    spec = f.json["speculative-config"]
    assert (spec["method"], spec["num_speculative_tokens"], spec["synthetic_acceptance_length"]) == ("dspark", 2, 2.51)
    assert p.spec.gates.error_rate == 0.10
    assert p.spec.gates.live == (0.25 if name == "tp" else 0.10)
    assert p.spec.load.warmup_grace_s == (3600 if name.startswith("dep") else 1800)
    assert p.offload == (name == "dep_offload")


def test_offload_arm(catalog):
    p = next(p for p in catalog.profiles if p.name == "dep_offload")
    kv = p.flags.offload
    assert kv.connector == "SimpleCPUOffloadConnector" and not kv.lazy
    assert kv.bytes_per_rank == 128 * 2**30 and kv.source == "cpu_bytes_to_use_per_rank"
    assert p.recipe.backend.aggregated_environment["PYTHONHASHSEED"] == "42"
    # inherited from dep.yaml and base.yaml through the overlay chain
    assert p.recipe.aggregated_flags["data-parallel-rpc-port"] == 13345
    assert p.recipe.backend.aggregated_environment["VLLM_USE_V2_MODEL_RUNNER"] == "1"


def test_cluster_description(catalog):
    cl = catalog.clusters["gb200-nv"]
    assert cl.runners == [f"gb200-nv_{i}" for i in range(4)]
    assert (cl.gpus_per_node, cl.host_dram_mib_per_node, cl.dram_utilization) == (4, 860160, 0.61)
    assert cl.slurm.partition and cl.slurm.account
    assert cl.markers == ["hardware", "gb200"]


def test_case_ids_and_fingerprints(catalog):
    ids = [p.case_id(c) for p in gb200(catalog) for c in p.spec.concurrency]
    assert "kimi-k3-gb200-dep_offload-c128" in ids and len(set(ids)) == 18
    fps = {p.fingerprint for p in gb200(catalog)}
    assert len(fps) == 4 and all(len(fp) == 64 for fp in fps)


@pytest.mark.catalog("kimi-k3")
def test_recipe_fingerprint_ignores_spelled_out_defaults(recipes):
    from tests.conftest import edit
    before = {p.id: p.fingerprint for p in Catalog.load(recipes).profiles}
    edit(recipes / "kimi-k3/gb200/tep.yaml", "  name: tep\n", "  name: tep\n  templates: []\n")
    after = {p.id: p.fingerprint for p in Catalog.load(recipes).profiles}
    assert before == after
    edit(recipes / "kimi-k3/gb200/tep.yaml", "gpu-memory-utilization: 0.92", "gpu-memory-utilization: 0.91")
    changed = {p.id: p.fingerprint for p in Catalog.load(recipes).profiles}
    assert changed["kimi-k3-gb200-tep"] != before["kimi-k3-gb200-tep"]
    assert changed["kimi-k3-gb200-dep"] == before["kimi-k3-gb200-dep"]


def test_shipped_fingerprints_stay_as_recorded_and_slo_tiers_leave_them(recipes):
    """A result is reused, compared and pooled with others by its recipe fingerprint; a key rackbench adds later
    (a gate, a load option) must leave every existing fingerprint as it was at its default (profile.LATER_KEYS), and
    the service-level tiers and the bound a point must show judge it without changing it. tests/data/fingerprints.json holds the
    shipped profiles' fingerprints: a change that alters one on purpose updates it and says so."""
    from tests.conftest import edit
    recorded = json.loads((REPO / "tests/data/fingerprints.json").read_text())
    assert {p.id: p.fingerprint for p in Catalog.load(recipes).profiles} == recorded
    edit(recipes / "kimi-k3/gb200/tep.yaml", "  name: tep\n",
         "  name: tep\n  slo:\n    strict: {ttft_ms: 500, tpot_ms: 20, attainment: 0.99}\n")
    assert by_id(Catalog.load(recipes), "kimi-k3-gb200-tep").fingerprint == recorded["kimi-k3-gb200-tep"]
    edit(recipes / "h200-7b/_sweep.yaml", "bound: {4: load, 32: gpu}", "bound: gpu")     # how a point is judged
    assert by_id(Catalog.load(recipes), "llama-7b-h200-vllm").fingerprint == recorded["llama-7b-h200-vllm"]


def test_base_is_a_plain_srt_slurm_recipe(repo):
    import yaml
    base = yaml.safe_load((repo / "recipes/kimi-k3/gb200/base.yaml").read_text())
    assert "profile" not in base and {"name", "model", "resources", "backend"} <= set(base)
    json.dumps(base)  # nothing exotic in it
