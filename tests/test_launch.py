"""The launch path offline: setup steps before any server, templates filled per node, preflight requests,
retargeting onto a stand-in cluster, and the Slurm step names release signals."""

import json

import pytest

from servebench.catalog import Catalog
from servebench.cluster.request import request_for
from servebench.errors import ConfigError
from servebench.preflight import entrypoint, login_findings, requests, retarget
from servebench.server.placement import dry_placement, placement_for
from servebench.server.plan import SETUP_GUARD, plan
from tests.conftest import by_id, edit, run_cli


def test_setup_script_and_dynamo_install_run_on_every_node_before_any_server(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    procs = plan(prof, dry_placement(prof)).processes
    roles = [p.role for p in procs]
    assert roles[:8] == ["setup"] * 8 and "setup" not in roles[8:]
    assert [p.name for p in procs[:8]] == ["setup0", "dynamo-install0", "setup1", "dynamo-install1",
                                           "setup2", "dynamo-install2", "setup3", "dynamo-install3"]
    setup = procs[0]
    assert setup.argv[:len(SETUP_GUARD)] == SETUP_GUARD and setup.argv[-2:] == (
        "bash", "/configs/kimik3-dspark-config-compat.sh")                     # pyxis: configs/ mounted at /configs
    assert setup.env["SERVEBENCH_MODEL"] == "/model" and setup.env["NCCL_IB_HCA"]    # the worker's environment
    install = procs[1]
    assert install.argv[1:4] == ("-m", "pip", "install") and install.argv[-1] == (
        "ai-dynamo @ git+https://github.com/ai-dynamo/dynamo.git@ba83080ecd31c1ce918559e576d3c5bc9e092ff1")
    assert [p.name for p in procs[8:11]] == ["etcd", "nats", "frontend"]


def test_render_shows_the_launch_sequence(repo):
    out = run_cli("render", "tp", cwd=repo).stdout
    order = [out.index(s) for s in ("## setup0 (runs to completion before the servers) on node 0",
                                    "## dynamo-install3 (runs to completion", "## etcd (infra)",
                                    "## frontend (frontend)", "## worker0 (worker)")]
    assert order == sorted(order)
    assert "--job-name=servebench-RUN-tp.worker0" in out               # the step name release signals


def test_stand_in_clusters_skip_the_dynamo_install(catalog):
    for pid in ("tiny-llama-cpu-dynamo", "tiny-llama-cpu-vllm"):
        prof = by_id(catalog, pid)
        assert not [p for p in plan(prof, dry_placement(prof)).processes if p.role == "setup"]


def test_templates_are_filled_per_node(recipes):
    edit(recipes / "kimi-k3/gb200/_agentx.yaml", "  load:  ", "  templates: [environment.RUN_LOGS]\n  load:  ")
    edit(recipes / "kimi-k3/gb200/base.yaml", '  ETCD_LEASE_TTL: "7200"',
         '  ETCD_LEASE_TTL: "7200"\n  RUN_LOGS: /logs/{job_id}/{node}-{node_rank}/{head_node}')
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    where = placement_for(prof, ["a1", "a2", "a3", "a4"], ["a1", "a2", "a3", "a4"], "/w", job_id="4242")
    workers = [p for p in plan(prof, where).processes if p.role == "worker"]
    assert [w.env["RUN_LOGS"] for w in workers] == [f"/logs/4242/a{r + 1}-{r}/a1" for r in range(4)]
    assert not any("{job_id}" in json.dumps(p.env) for p in plan(prof, where).processes)


def test_preflight_requests_name_what_each_node_checks(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-tp")
    where = placement_for(prof, ["n1", "n2", "n3", "n4"], ["n1", "n2", "n3", "n4"], "/w")
    sp = plan(prof, where)
    reqs = requests(prof, sp, where)
    assert sorted(reqs) == [0, 1, 2, 3]
    head, follower = reqs[0], reqs[1]
    assert head["imports"] == ["dynamo.frontend", "dynamo.vllm"] and follower["imports"] == ["dynamo.vllm"]
    assert [p["id"] for p in head["parse"]] == ["frontend", "worker0"]
    assert "--headless" in follower["parse"][0]["args"]
    assert head["objects"] == [{"flag": "scheduler-cls", "value": "vllm.v1.core.sched.async_scheduler.AsyncScheduler"}]
    assert {p["path"]: p["kind"] for p in head["paths"]} == {"/model": "model", "/tmp/Kimi-K3-DSpark": "setup"}
    assert head["gpus"] == 4 and head["interfaces"] == [""]                # detected on the node
    assert [e["what"] for e in head["endpoints"]] == ["etcd", "NATS"]
    assert head["versions"] == {"dynamo": "1.3.0"}
    assert entrypoint(sp.proc("etcd")) is None and entrypoint(sp.proc("setup0")) is None


def test_retarget_keeps_the_shape(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    local = retarget(prof, catalog.clusters["gb200-local"])
    assert local.cluster.name == "gb200-local" and local.topology == prof.topology
    req = request_for(local, "r", "/tmp/x")
    assert "cpus-per-task" not in req.directives and "container-remap-root" not in req.srun_options
    assert req.container_image is None and req.stop_grace_s == 60
    found = login_findings(local, placement_for(local, ["n1"] * 4, ["n1"] * 4, "/w"))
    assert [f.check for f in found] == ["container image", "slurm options"]
    with pytest.raises(ConfigError, match="cluster slurm-local has 4 nodes x 1 GPUs"):
        retarget(prof, catalog.clusters["slurm-local"])
