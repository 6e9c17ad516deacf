"""Property tests: generated valid profiles pass every rule; each kind of breakage is caught with its message."""

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rackbench.core import yamlio
from rackbench.core.errors import ConfigError
from rackbench.recipe.schema.cluster import ClusterSpec
from rackbench.catalog.loader import build_profile
from rackbench.recipe.layering import resolve_layers

PROFILE = Path("mem/p.yaml")
BASE = Path("mem/base.yaml")
GIB = 2**30


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def valid_setups(draw):
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 4))
    total = gpn * nodes
    tp = draw(st.sampled_from(divisors(total)))
    pp = draw(st.sampled_from(divisors(total // tp)))
    dp = total // (tp * pp)
    ep_on = draw(st.booleans())
    seqs = draw(st.integers(1, 128))
    conc = sorted(draw(st.sets(st.integers(1, seqs * dp), min_size=1, max_size=6)))
    k = draw(st.integers(0, 3))
    offload = draw(st.booleans())
    dram_mib = draw(st.integers(64 * 1024, 2 * 1024 * 1024))
    util = draw(st.floats(0.1, 1.0))
    cluster = ClusterSpec(name="c", kind="gpu", backend="slurm", gpu_type="gpu", nodes=4, gpus_per_node=gpn,
                          hbm_gib_per_gpu=80, host_dram_mib_per_node=dram_mib, dram_utilization=util)
    flags = {
        "tensor-parallel-size": tp, "data-parallel-size": dp, "pipeline-parallel-size": pp,
        "max-num-seqs": seqs, "enable-prefix-caching": True,
        "compilation-config": json.dumps({"cudagraph_capture_sizes": list(range(1, seqs * (1 + k) + 1))}),
    }
    if ep_on:
        flags["enable-expert-parallel"] = True
    if k:
        flags["speculative-config"] = json.dumps({"method": "ngram", "num_speculative_tokens": k})
    labels = {"spec-decoding": "mtp" if k else "none", "kv-offloading": "none"}
    if offload:
        ranks = min(total, gpn)
        per_rank = draw(st.integers(1, int(cluster.dram_budget_bytes_per_node // ranks)))
        flags["kv-transfer-config"] = json.dumps({"kv_connector": "SimpleCPUOffloadConnector", "kv_role": "kv_both",
                                                  "kv_connector_extra_config": {"cpu_bytes_to_use_per_rank": per_rank}})
        labels.update({"kv-offloading": "dram", "kv-offload-backend": "vllm-simple"})
    base = {
        "name": "gen", "model": {"path": "m", "container": "img:1", "precision": "fp8"},
        "resources": {"gpu_type": "gpu", "gpus_per_node": gpn, "agg_nodes": nodes, "agg_workers": 1},
        "backend": {"type": "vllm", "connector": None, "aggregated_environment": {"A": "1"},
                    "vllm_config": {"aggregated": flags}},
    }
    prof = {"extends": "base.yaml", "profile": {
        "name": "gen", "model": "m", "cluster": "c", "concurrency": conc,
        "layout": {"tp": tp, "dp": dp, "pp": pp, "ep": tp * dp if ep_on else 1}, "labels": labels}}
    return cluster, base, prof


def build(cluster, base, prof):
    docs = {str(BASE): base, str(PROFILE): prof}
    return build_profile(resolve_layers(PROFILE, docs), {"c": cluster})


def flags_of(base):
    return base["backend"]["vllm_config"]["aggregated"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_setups())
def test_valid_profiles_pass(setup):
    profile = build(*setup)
    assert profile.spec.layout.gpus == profile.recipe.resources.agg_nodes * profile.recipe.resources.gpus_per_node


def _break(kind, cluster, base, prof):
    p, f = prof["profile"], flags_of(base)
    if kind == "ep":
        p["layout"]["ep"] += 1
        return "EP"
    if kind == "concurrency-duplicate":
        p["concurrency"].append(p["concurrency"][-1])
        return "duplicate concurrencies"
    if kind == "concurrency-order":
        assume(len(p["concurrency"]) >= 2)
        p["concurrency"].reverse()
        return "must ascend"
    if kind == "concurrency-positive":
        p["concurrency"].insert(0, 0)
        return "must be > 0"
    if kind == "batch":
        p["concurrency"].append(f["max-num-seqs"] * p["layout"]["dp"] + 1)
        return "< largest concurrency"
    if kind == "gpus":
        p["layout"]["tp"] *= 2
        f["tensor-parallel-size"] *= 2
        if p["layout"]["ep"] > 1:
            p["layout"]["ep"] *= 2
        return "uses TP x DP x PP"
    if kind == "json":
        f["attention-config"] = '{"backend": "X"'
        return "not valid JSON"
    if kind == "placeholder":
        base["backend"]["aggregated_environment"]["A"] = "${HOME}/x"
        return "literal placeholder"
    if kind == "unknown-key":
        base["resorces"] = {}
        return "unknown key"
    if kind == "cuda-graphs":
        cfg = json.loads(f["compilation-config"])
        assume(len(cfg["cudagraph_capture_sizes"]) > 1)
        cfg["cudagraph_capture_sizes"] = cfg["cudagraph_capture_sizes"][:-1]
        f["compilation-config"] = json.dumps(cfg)
        return "does not cover the per-engine batch"
    if kind == "offload-dram":
        ranks = min(p["layout"]["tp"] * p["layout"]["dp"] * p["layout"]["pp"], cluster.gpus_per_node)
        f["kv-transfer-config"] = json.dumps({"kv_connector": "SimpleCPUOffloadConnector", "kv_connector_extra_config": {
            "cpu_bytes_to_use_per_rank": int(cluster.dram_budget_bytes_per_node // ranks) + 1}})
        p["labels"].update({"kv-offloading": "dram", "kv-offload-backend": "vllm-simple"})
        return "offload pool"
    raise AssertionError(kind)


KINDS = ["ep", "concurrency-duplicate", "concurrency-order", "concurrency-positive", "batch", "gpus", "json",
         "placeholder", "unknown-key", "cuda-graphs", "offload-dram"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_setups(), st.sampled_from(KINDS))
def test_each_breakage_is_caught(setup, kind):
    cluster, base, prof = copy.deepcopy(setup)
    fragment = _break(kind, cluster, base, prof)
    with pytest.raises(ConfigError) as err:
        build(cluster, base, prof)
    assert any(fragment in p.message for p in err.value.problems), str(err.value)
    assert all(p.file.startswith("mem/") and p.fix for p in err.value.problems)


scalars = st.one_of(st.integers(), st.booleans(), st.text("abcxyz -_.", min_size=1, max_size=8))
keys = st.text("abcdefghij_-", min_size=1, max_size=6).filter(lambda k: k.strip("-_") == k and k not in ("y", "n"))
trees = st.recursive(st.dictionaries(keys, scalars, min_size=1, max_size=4),
                     lambda inner: st.dictionaries(keys, st.one_of(scalars, inner), min_size=1, max_size=4),
                     max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(trees, st.data())
def test_duplicate_key_anywhere_is_rejected(tree, data):
    text = yaml.safe_dump(tree, sort_keys=False, default_flow_style=False)
    lines = text.splitlines()
    scalar_lines = [i for i, ln in enumerate(lines) if re.match(r"^\s*[^\s:][^:]*: \S", ln)]
    assume(scalar_lines)
    i = data.draw(st.sampled_from(scalar_lines))
    assert yamlio.parse(text, "t.yaml") == tree
    broken = "\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1:]) + "\n"
    with pytest.raises(ConfigError) as err:
        yamlio.parse(broken, "t.yaml")
    prob = err.value.problems[0]
    assert "duplicate key" in prob.message and prob.line == i + 2 and prob.file == "t.yaml"
