"""The rules about CPU KV offload: the connector set once, labels that say what is configured, and the offload
pools of a node within its DRAM budget. Part of :data:`rackbench.catalog.rules.RULES`."""

from __future__ import annotations

import math
from typing import Iterator

from rackbench.catalog import capacity as capacity_model
from rackbench.core.errors import Problem
from rackbench.recipe.profile import Profile


def connector_conflict(p: Profile) -> Iterator[Problem]:
    """Catches `backend.connector` and a `kv-transfer-config` flag both set."""
    if p.recipe.backend.connector is not None and p.flags.has("kv-transfer-config"):
        yield p.recipe_problem(
            ["backend", "connector"], f"connector {p.recipe.backend.connector!r} also renders "
            "--kv-transfer-config, which vllm_config already sets (one would silently win)",
            "set backend.connector: null")


def offload_labels(p: Profile) -> Iterator[Problem]:
    """Catches `kv-offloading` label vs the connector actually configured; `spec-decoding` label vs
    `speculative-config`."""
    kv = p.flags.offload
    labels = p.spec.labels
    if labels.kv_offloading == "dram" and kv is None:
        yield p.profile_problem(
            ["labels", "kv-offloading"], "labelled dram offload, but no offload connector in "
            "--kv-transfer-config", "add the connector or label kv-offloading: none")
    if labels.kv_offloading == "none" and kv is not None:
        yield p.profile_problem(
            ["labels", "kv-offloading"], f"{kv.connector} is configured but the profile is "
            "labelled kv-offloading: none", "label it kv-offloading: dram")
    if labels.kv_offloading == "dram" and not labels.kv_offload_backend:
        yield p.profile_problem(
            ["labels", "kv-offload-backend"], "dram offload needs a backend label",
            "e.g. kv-offload-backend: vllm-simple")
    spec_on = p.flags.has("speculative-config")
    if (labels.spec_decoding != "none") != spec_on:
        yield p.profile_problem(
            ["labels", "spec-decoding"], f"labelled {labels.spec_decoding!r} but speculative-config "
            f"is {'set' if spec_on else 'absent'}", "make the label match the flags")


def offload_dram_budget(p: Profile) -> Iterator[Problem]:
    """Catches offload pool per rank × ranks per node > node DRAM × dram-utilization.

    vLLM sizes the CPU pools per rank."""
    kv = p.flags.offload
    if kv is None or kv.bytes_per_rank is None:
        return
    pool = capacity_model.offload_per_node(p.flags, p.cluster, p.topology.workers)
    if pool.need > pool.budget:
        gib = 2**30
        yield p.recipe_problem(
            p.flag_path("kv-transfer-config"),
            f"offload pool {kv.bytes_per_rank / gib:.1f} GiB per rank ({kv.source}) x {pool.ranks} ranks per "
            f"node = {pool.need / gib:.1f} GiB > {p.cluster.name} DRAM {p.cluster.host_dram_mib_per_node} MiB x "
            f"{p.cluster.dram_utilization} = {pool.budget / gib:.1f} GiB",
            f"use at most {math.floor(pool.budget / pool.ranks / gib)} GiB per rank")
