"""The pure topology step, tabulated per layout, and the one set of flags the launcher owns."""

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.recipe.flags import canonical
from rackbench.catalog.flag_rules import entrypoint_flags
from rackbench.server.assembly import dry_placement
from rackbench.server.plan import allocator, plan, topology_args
from rackbench.recipe.topology import DERIVED_FLAGS, LAUNCHER_FLAGS, PORT_FLAGS, topology
from tests.conftest import by_id, edit

# layout -> (modes per node, DP ranks per node, engines, registering processes)
TABLE = [
    (dict(tp=16, dp=1, pp=1, nodes=4, gpus_per_node=4),
     ["leader", "headless", "headless", "headless"], [(0,), (), (), ()], 1, 1),
    (dict(tp=4, dp=4, pp=1, nodes=4, gpus_per_node=4, dp_given=True),
     ["dp_hybrid"] * 4, [(0,), (1,), (2,), (3,)], 4, 4),
    (dict(tp=2, dp=8, pp=1, nodes=4, gpus_per_node=4, dp_given=True),
     ["dp_hybrid"] * 4, [(0, 1), (2, 3), (4, 5), (6, 7)], 8, 4),
    (dict(tp=4, dp=4, pp=1, nodes=4, gpus_per_node=4, dp_given=True, dp_launch_mode="per_rank"),
     ["dp_rank"] * 4, [(0,), (1,), (2,), (3,)], 4, 4),
    (dict(tp=1, dp=1, pp=1, nodes=1, gpus_per_node=1), ["single"], [(0,)], 1, 1),
    (dict(tp=8, dp=1, pp=2, nodes=4, gpus_per_node=4),
     ["leader", "headless", "headless", "headless"], [(0,), (), (), ()], 1, 1),
]


@pytest.mark.parametrize("layout, modes, ranks, engines, registering", TABLE,
                         ids=["tp16", "dep16", "tp2xdp8", "dep16-per-rank", "single", "tp8xpp2"])
def test_topology_table(layout, modes, ranks, engines, registering):
    t = topology(**layout)
    assert [r.mode for r in t.roles] == modes
    assert [r.dp_ranks for r in t.roles] == ranks
    assert (t.engines, t.registering) == (engines, registering)


def test_every_per_node_flag_the_plan_writes_is_owned_by_the_launcher(catalog):
    """One definition: what topology_args writes is exactly what the rule refuses in recipes (plus the ports
    a recipe may choose). Before, plan.py and rules.py kept two lists that disagreed."""
    for prof in catalog.profiles:
        where = dry_placement(prof)
        ports = allocator(prof, where)
        for role in prof.topology.roles:
            written = {canonical(a) for a in topology_args(role, prof, where, ports) if a.startswith("--")}
            assert written <= LAUNCHER_FLAGS, (prof.id, written - LAUNCHER_FLAGS)
    assert DERIVED_FLAGS.isdisjoint(PORT_FLAGS)


@pytest.mark.parametrize("flag", sorted(DERIVED_FLAGS))
@pytest.mark.catalog("kimi-k3")
def test_a_recipe_may_not_set_a_derived_flag(recipes, flag):
    edit(recipes / "kimi-k3/gb200/dep.yaml", "        max-num-seqs: 64\n", f"        max-num-seqs: 64\n        {flag}: x\n")
    prof = by_id(Catalog.load(recipes, skip_rules={"entrypoint-flags", "flag-values"}), "kimi-k3-gb200-dep")
    found = list(entrypoint_flags(prof))
    assert any(f"--{flag} is derived from the layout" in p.message for p in found), found


@pytest.mark.catalog("kimi-k3")
def test_a_recipe_port_reaches_every_node_once(recipes):
    edit(recipes / "kimi-k3/gb200/dep.yaml", "        max-num-seqs: 64\n",
         "        max-num-seqs: 64\n        master-port: 29777\n")
    edit(recipes / "kimi-k3/gb200/dep.yaml", "data-parallel-rpc-port: 13345", "data-parallel-rpc-port: 14444")
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    for w in [p for p in plan(prof, dry_placement(prof)).processes if p.role == "worker"]:
        argv = list(w.argv)
        assert argv.count("--data-parallel-rpc-port") == 1 and argv[argv.index("--data-parallel-rpc-port") + 1] == "14444"
        assert "--master-port" not in argv      # DEP16 nodes own DP ranks; no torch.distributed master across nodes


def test_profile_topology_matches_its_plan(catalog):
    for prof in catalog.profiles:
        sp = plan(prof, dry_placement(prof))
        assert len(sp.engines) == prof.topology.engines, prof.id
        if sp.kind == "dynamo":
            assert sp.expected_instances == prof.topology.registering, prof.id


def test_agg_workers_are_independent_engines_with_their_own_gpus(catalog):
    """8 workers x TP2 on 2 nodes of 8 GPUs: 8 engines, each pinned to its GPU pair, 16 GPUs in the results.
    Before, this launched one engine spread over both nodes and reported 2 GPUs."""
    from rackbench.recipe.profile import Profile
    from rackbench.recipe.schema.srt import SrtRecipe

    tp = by_id(catalog, "kimi-k3-gb200-tp")
    data = tp.recipe.model_dump()
    data["resources"].update(gpus_per_node=8, agg_nodes=2, agg_workers=8, gpus_per_agg=2)
    data["backend"]["vllm_config"]["aggregated"]["tensor-parallel-size"] = 2
    prof = Profile(tp.file, tp.spec, SrtRecipe.model_validate(data), tp.cluster.model_copy(update={"gpus_per_node": 8}),
                   tp.layers, tp.model)
    assert prof.topology.workers == 8 and prof.topology.gpus == 16 and prof.topology.engines == 8
    sp = plan(prof, dry_placement(prof))
    workers = [p for p in sp.processes if p.role == "worker"]
    assert [w.rank for w in workers] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [w.argv[w.argv.index("env") + 1] for w in workers] == \
        [f"CUDA_VISIBLE_DEVICES={2 * s},{2 * s + 1}" for s in range(4)] * 2
    assert len({(w.rank, w.env["DYN_SYSTEM_PORT"]) for w in workers}) == 8 and sp.expected_instances == 8
    assert not any("--headless" in w.argv or "--nnodes" in w.argv for w in workers)
    from tests.test_results import typed
    r = typed(prof)                                      # the H200 recording, judged as this deployment
    assert r.identity.gpus == r.throughput.gpus == 16
    assert r.throughput.output_tps_per_gpu == pytest.approx(r.throughput.output_tps / 16)


def test_workers_larger_than_a_node_span_nodes_of_their_own():
    t = topology(tp=8, dp=1, pp=1, nodes=4, gpus_per_node=4, workers=2)
    assert [(r.rank, r.worker, r.mode, r.head) for r in t.roles] == [
        (0, 0, "leader", 0), (1, 0, "headless", 0), (2, 1, "leader", 2), (3, 1, "headless", 2)]
    assert (t.engines, t.registering, t.gpus) == (2, 2, 16)
