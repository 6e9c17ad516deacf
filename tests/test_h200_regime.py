"""#34 item 1: H200 profiles in the cluster's regime (recipes/h200-7b): a generated ~7B Llama with CUDA graphs and
the GB200 recipes' compilation config, a 12 GiB GPU KV budget that lets ~19 agentic sequences run while the live
sessions' prefixes overflow it, a 32 GiB CPU tier on the offload arms, and gates.bound: the high point GPU-bound, the low one load-bound. Rendering, the capacity
model and the model description, offline."""

import json
import shlex
from pathlib import Path

import pytest

from rackbench.catalog.capacity import estimate
from rackbench.server.generated import GENERATED
from rackbench.recipe.schema.model import ModelSpec
from rackbench.core import yamlio
from tests.conftest import REPO, by_id, run_cli

PROFILES = ["llama-7b-h200-vllm", "llama-7b-h200-vllm_offload", "llama-7b-h200-dynamo", "llama-7b-h200-dynamo_offload"]
GIB = 2**30


def args(alias: str) -> dict[str, int]:
    a = GENERATED[alias]
    return {a[i].lstrip("-"): int(a[i + 1]) for i in range(0, len(a), 2)}


def test_the_model_description_is_what_the_generator_makes():
    g = args("llama-7b")
    h, kv = g["hidden"], g["kv-heads"] * (g["hidden"] // g["heads"])
    attention, mlp, norms = 2 * h * h + 2 * h * kv, 3 * h * g["intermediate"], 2 * h
    total = g["layers"] * (attention + mlp + norms) + 8192 * h + h            # tokenizer vocabulary 8192, tied
    spec = ModelSpec.model_validate(yamlio.load(REPO / "recipes/models/llama-7b.yaml"))
    assert spec.total_params.value == total == 7_013_142_528
    assert (spec.layers.value, spec.hidden_size.value, spec.attention.kv_heads.value,
            spec.attention.head_dim.value) == (g["layers"], h, g["kv-heads"], h // g["heads"])


@pytest.mark.parametrize("profile_id", PROFILES)
def test_the_kv_budget_holds_about_19_agentic_sequences_and_the_offload_tier_fits_the_host(catalog, profile_id):
    p = by_id(catalog, profile_id)
    est = estimate(p)
    assert est.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072            # K and V, bf16
    assert est.kv_pool == pytest.approx(12 * GIB) and est.kv_tokens == 98_304 and est.fits, est.problems
    assert 18 <= est.kv_tokens // 5000 <= 20                                  # sequences of ~5k tokens at once
    assert max(p.spec.concurrency) * 5000 > est.kv_tokens                     # c32's live contexts overflow it
    if p.offload:
        assert est.dram_pool_per_node == 32 * GIB <= est.dram_budget_per_node
        assert est.dram_pool_per_node > max(p.spec.concurrency) * 5000 * est.kv_bytes_per_token   # all fit there
    assert p.spec.gates.bound == {4: "load", 32: "gpu"} and p.spec.concurrency == [4, 32]


@pytest.mark.parametrize("case", ["llama-7b-h200-vllm-c4", "llama-7b-h200-dynamo_offload-c4"])
def test_the_servers_run_with_cuda_graphs_covering_the_batch_never_eager(case, repo):
    out = run_cli("render", case, cwd=repo)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "--kv-cache-memory-bytes" in ln)
    argv = shlex.split(line)
    assert "--enforce-eager" not in argv
    config = json.loads(argv[argv.index("--compilation-config") + 1])
    seqs = int(argv[argv.index("--max-num-seqs") + 1])
    assert config["cudagraph_mode"] == "PIECEWISE" and max(config["cudagraph_capture_sizes"]) >= seqs == 64
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(12 * GIB)
    assert "llama-7b" in line                                                  # the generated model's alias resolved


# #34 item 4: the 7B profiles recorded on the lent H200 (tests/data/h200-7b/README.md), vllm and vllm_offload at c4 and
# c32, 120 s each, one server on the GPU at a time
RECORDED = REPO / "tests/data/h200-7b"


LONG = REPO / "tests/data/h200-7b-long"          # vllm at c32 for 600 s (scripts/gpu-7b-runs long-c32, 2026-12-04)


def recorded(case: str, folder: Path = RECORDED):
    from rackbench.results.model import PointResult
    return PointResult.model_validate_json((folder / "points" / f"{case}.json").read_text())


@pytest.mark.parametrize("arm", ["vllm", "vllm_offload"])
def test_the_recorded_high_point_keeps_the_h200_busy_and_serves_far_more_than_the_low_one(arm):
    low, high = recorded(f"llama-7b-h200-{arm}-c4"), recorded(f"llama-7b-h200-{arm}-c32")
    ev = high.bound.evidence
    assert ev["gpu_power_share"] >= 0.6 or ev["gpu_utilization"] >= 0.6, ev                  # 82% / 75% of 700 W
    assert high.throughput.output_tps_per_gpu >= 1.5 * low.throughput.output_tps_per_gpu     # 1.8x / 3.6x
    assert low.bound.evidence["gpu_power_share"] < 0.6                                        # c4 leaves it half idle
    assert high.bound.evidence["running_mean"] > 15 > low.bound.evidence["running_mean"]      # a batch, not ~6


@pytest.mark.parametrize("folder, case", [(d, p.stem) for d in (RECORDED, LONG)
                                          for p in sorted((d / "points").glob("*.json"))])
def test_each_recorded_bound_is_what_its_evidence_says_and_the_shipped_gates_accept_it(catalog, folder, case):
    """The stored bound is the one rackbench.results.bound judges again from the point's own series, telemetry,
    machine and host record; c4 ran all it was offered (load), c32 kept the GPU busy (gpu). Recorded under
    `gates.bound: gpu` for every point, the c4 points failed that gate; the shipped `{4: load, 32: gpu}` passes all."""
    from rackbench.results import bound
    from rackbench.results.verdict import judge
    r = recorded(case, folder)
    again = bound.judge(r.series, r.telemetry, r.machine, r.host.model_dump() if r.host else None,
                        r.bound.evidence["client_late"])
    assert again == r.bound
    assert r.bound.bound == ("gpu" if case.endswith("-c32") else "load"), r.bound.reason
    (stored,) = [c for c in r.verdict.checks if c.name == "bound"]
    # recorded under `bound: gpu` for every point (h200-7b) and under {4: load, 32: gpu} (h200-7b-long)
    assert stored.ok == case.endswith("-c32")
    (now,) = [c for c in judge(r, by_id(catalog, r.identity.profile)).checks if c.name == "bound"]
    assert now.ok, now.message


SEARCH = REPO / "tests/data/h200-7b-search"      # the vllm_search probes (scripts/gpu-7b-runs search, 2026-12-04)


@pytest.mark.parametrize("c, expected", [(4, "load"), (8, "load"), (16, "gpu"), (24, "gpu"), (32, "kv")])
def test_each_search_probe_is_bound_where_its_evidence_says(c, expected):
    """The search's probes on the H200 (decided in 30-68 s, c24 at its 120 s cap): the bound judged again from each
    probe's own series, telemetry, machine and host record is the stored one. c32, decided at 45 s, was `kv`: its
    batch full (~20 running, ~7 waiting) while the GPU drew 57% of its cap over the short window, where the 120 s
    c32 of the grid reached 82% (`gpu`); the bound is the window's, not the concurrency's."""
    from rackbench.results import bound
    r = recorded(f"llama-7b-h200-vllm_search-c{c}", SEARCH)
    again = bound.judge(r.series, r.telemetry, r.machine, r.host.model_dump() if r.host else None,
                        r.bound.evidence["client_late"])
    assert again == r.bound and r.bound.bound == expected, r.bound.reason


def test_a_point_whose_trace_ran_out_before_its_planned_length_fails_saying_how_many_sessions(catalog):
    """Recorded with 16 sessions per concurrency, the c4 points' traces ran out 80 s into their planned 120 s: every
    request sent and done, a shorter window than planned. The check names the key and a size that would last; the
    c32 points ran their length and have no such check."""
    import dataclasses
    from rackbench.results.verdict import judge
    prof = by_id(catalog, "llama-7b-h200-vllm")
    trace = prof.spec.load.trace.model_copy(update={"sessions_per_concurrency": 16})     # as it was recorded
    load = prof.spec.load.model_copy(update={"trace": trace})
    prof = dataclasses.replace(prof, spec=prof.spec.model_copy(update={"load": load}))
    low = recorded("llama-7b-h200-vllm-c4")
    (check,) = [c for c in judge(low, prof).checks if c.name == "trace"]
    assert not check.ok and check.message == (
        "the trace ran out: its 358 requests span 80 s of the planned 120 s (load.duration_s), so the point measured a "
        "shorter window than planned and its end a draining trace; raise profile.load.trace.sessions_per_concurrency "
        "(16) to at least 31")
    assert by_id(catalog, "llama-7b-h200-vllm").spec.load.trace.sessions_per_concurrency >= 31     # the shipped fix
    assert not [c for c in judge(recorded("llama-7b-h200-vllm-c32"), prof).checks if c.name == "trace"]


def test_the_7b_search_probes_within_the_batch_and_stops_each_probe_once_decided(catalog):
    """#32 on the H200 (scripts/gpu-7b-runs search): the vllm arm's highest concurrency meeting `interactive`,
    probed in one server start within the batch max-num-seqs allows, each probe ended once its verdict is known."""
    p = by_id(catalog, "llama-7b-h200-vllm_search")
    assert p.spec.search.tier == "interactive" and p.spec.concurrency == [4, 64]
    assert max(p.spec.concurrency) <= int(p.flags.value("max-num-seqs")) == 64
    assert p.spec.load.stop.mode == "decide" and p.spec.gates.bound is None
    tier = p.spec.slo["interactive"]
    assert (tier.ttft_ms, tier.tpot_ms, tier.attainment) == (1000, 40, 0.9)
