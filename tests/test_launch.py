"""The launch path offline: each process's preamble in its own step (as pyxis needs), what a container can see,
templates filled per node, preflight requests, retargeting onto a stand-in cluster, and the Slurm step names release
signals."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.cluster import backend_for
from rackbench.cluster.request import request_for
from rackbench.core.results_folder import ResultsFolder
from rackbench.core.errors import ConfigError
from rackbench.server.preflight import entrypoint, login_findings, requests, retarget
from rackbench.server.assembly import dry_placement, launch_problems
from rackbench.server.containers import unmet_needs
from rackbench.server.placement import placement_for
from rackbench.server.plan import plan
from rackbench.server.steps import Container
from rackbench.tools import FOLDER as TOOLS
from tests.conftest import REPO, by_id, edit, run_cli

# gb200-nv's import of the recipe's vllm/vllm-openai:kimi-k3 (slurm.images): what every step's container runs
NV_IMAGE = "/mnt/lustre01/users-public/sa-shared/rackbench/images/vllm-openai+kimi-k3.sqsh"

PREAMBLE = TOOLS / "preamble.py"


def test_each_server_process_runs_its_preamble_in_its_own_step(catalog):
    """srt-slurm's worker/frontend preamble: the setup script, then the Dynamo install, in the process's own step
    and so in its own (unnamed, per-step) pyxis container; no separate setup step whose writes would vanish."""
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    sp = plan(prof, dry_placement(prof))
    assert [p.name for p in sp.processes[:3]] == ["etcd", "nats", "frontend"]
    assert {p.role for p in sp.processes} == {"infra", "frontend", "worker"}
    servers = [p for p in sp.processes if p.role != "infra"]
    assert len(servers) == 5 and all([st["name"] for st in p.preamble] == ["setup", "dynamo"] for p in servers)
    worker = sp.proc("worker0")
    setup, install = worker.preamble
    assert setup["argv"] == ["bash", "/configs/kimik3-dspark-config-compat.sh"]     # pyxis: configs/ at /configs
    assert setup["unless_missing"] == "/model" and setup["env"] == {"RACKBENCH_MODEL": "/model"}
    # #52 item 1: the runtime built at the recipe's commit, once, into the shared cache's wheelhouse; no pip per step
    source = "git+https://github.com/ai-dynamo/dynamo.git@ba83080ecd31c1ce918559e576d3c5bc9e092ff1"
    assert install["argv"][:2] == ["python3", "/rackbench-tools/dynamo_env.py"]
    assert install["argv"][2].startswith(f"{NV_IMAGE.split('/images/')[0]}/cache/dynamo/ai-dynamo-runtime-")
    assert install["argv"][3:] == [f"ai-dynamo-runtime @ {source}#subdirectory=lib/bindings/python",
                                   f"ai-dynamo @ {source}"]
    assert {tuple(p.preamble[1]["argv"]) for p in servers} == {tuple(install["argv"])}    # one wheelhouse for all
    assert worker.command[:2] == ("python3", "/rackbench-tools/preamble.py")      # the container's interpreter
    assert worker.command[-len(worker.argv):] == worker.argv and worker.command[-len(worker.argv) - 1] == "--"
    assert json.loads(worker.command[2]) == list(worker.preamble)
    assert worker.env["NCCL_IB_HCA"] and worker.env["DSPARK_SRC"] == "/models/Kimi-K3-DSpark"
    assert worker.container.image == NV_IMAGE and worker.container.name is None
    assert ("/mnt/lustre01/users-public/sa-shared/rackbench/models/Kimi-K3-DSpark", "/models/Kimi-K3-DSpark") \
        in worker.container.mounts
    assert unmet_needs(sp) == []


def _with(spec, **changes):
    return dataclasses.replace(spec, **changes)


def test_a_preamble_in_a_step_of_its_own_is_refused_where_its_writes_vanish(catalog):
    """The old launch: setup as its own step before the workers. In an unnamed container its /tmp view is gone
    when the step ends, so the worker that needs it is refused before anything starts; on the node's own
    filesystem, or in one named container, the same plan is fine."""
    prof = by_id(catalog, "kimi-k3-gb200-tp")
    sp = plan(prof, dry_placement(prof))
    worker = sp.proc("worker0")
    alone = _with(worker, name="setup0", role="infra", argv=("true",), needs=frozenset())
    bare = _with(worker, preamble=())
    old = dataclasses.replace(sp, processes=(alone, bare))
    found = unmet_needs(old)
    assert len(found) == 2 and all(line.startswith("worker0 on node 0 needs ") for line in found)
    assert f"made by setup0 (in container {NV_IMAGE} (unnamed: it and everything written in it vanish " \
           "with the step)" in found[0] and "run it in worker0's own preamble, or share one named container" in found[0]
    named = Container(worker.container.image, worker.container.mounts, "rackbench-node0")
    shared = dataclasses.replace(sp, processes=(_with(alone, container=named), _with(bare, container=named)))
    assert unmet_needs(shared) == []
    host = dataclasses.replace(sp, processes=(_with(alone, container=Container()), _with(bare, container=Container())))
    assert unmet_needs(host) == []
    nowhere = dataclasses.replace(sp, processes=(bare,))
    assert "made by no step on its node" in unmet_needs(nowhere)[0]


@pytest.mark.catalog("kimi-k3")
def test_a_host_path_inside_a_container_is_refused_offline(recipes):
    """DSPARK_SRC at the node's staging path: the container sees that folder only at its mount's destination."""
    edit(recipes / "clusters/gb200-nv.yaml", "DSPARK_SRC: /models/Kimi-K3-DSpark",
         "DSPARK_SRC: /mnt/numa1/models/Kimi-K3-DSpark")
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-tep")
    found = launch_problems(prof)
    assert found and found[0] == (
        "kimi-k3-gb200-tep: frontend: environment DSPARK_SRC names /mnt/numa1/models/Kimi-K3-DSpark, a path on the "
        f"node; frontend runs in container {NV_IMAGE} (unnamed: it and everything written in it vanish "
        "with the step); mounts " + ", ".join(f"{s}:{d}" for s, d in sp_mounts(prof)) + ", so it is not there: use "
        "its mount destination, or add /mnt/numa1/models/Kimi-K3-DSpark: <inside> to runtime.container_mounts of "
        "the cluster file")
    res = run_cli("--recipes", str(recipes), "matrix")
    assert res.returncode == 1 and "launch problem(s) above" in res.stdout
    assert "kimi-k3-gb200-dep: worker0: environment DSPARK_SRC names /mnt/numa1" in res.stderr


def sp_mounts(prof):
    return dry_placement(prof).mounts


def test_the_preamble_runner_stops_on_a_failing_step_and_skips_a_step_whose_input_is_missing(tmp_path):
    marker = tmp_path / "ran"
    steps = [{"name": "setup", "argv": ["touch", str(tmp_path / "never")], "unless_missing": str(tmp_path / "no")},
             {"name": "mark", "argv": ["sh", "-c", 'echo "$WHO" > "$0"', str(marker)], "env": {"WHO": "step"},
              "mkdir": [str(tmp_path / "made")]}]
    done = subprocess.run([sys.executable, str(PREAMBLE), json.dumps(steps), "--", "sh", "-c", "echo started $0", "x"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"rackbench: setup not run: {tmp_path / 'no'} does not exist on this node" in done.stdout
    assert done.stdout.strip().endswith("started x") and marker.read_text() == "step\n"
    assert (tmp_path / "made").is_dir() and not (tmp_path / "never").exists()
    failing = [{"name": "dynamo", "argv": ["sh", "-c", "exit 3"]}]
    done = subprocess.run([sys.executable, str(PREAMBLE), json.dumps(failing), "--", "touch", str(tmp_path / "proc")],
                          capture_output=True, text=True)
    assert done.returncode == 3 and "rackbench: dynamo failed with exit code 3; touch was not started" in done.stdout
    assert not (tmp_path / "proc").exists()


def test_the_dspark_setup_script_needs_the_checkpoint_as_the_process_sees_it(tmp_path):
    """Inside the container the model is /model: a checkpoint path derived from it would be /Kimi-K3-DSpark.
    The script takes DSPARK_SRC (the cluster file's, a mount destination) and says so when it is unset."""
    script = REPO / "recipes/configs/kimik3-dspark-config-compat.sh"
    env = {"PATH": os.environ["PATH"], "RACKBENCH_MODEL": "/model", "DSPARK_VIEW": str(tmp_path / "view")}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "set DSPARK_SRC to the staged Kimi-K3-DSpark checkpoint" in done.stderr
    src = tmp_path / "staged"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"mask_token_id": 163606}))
    (src / "model.safetensors").write_text("w")
    done = subprocess.run(["bash", str(script)], env={**env, "DSPARK_SRC": str(src)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    view = tmp_path / "view"
    assert json.loads((view / "config.json").read_text())["pard_token"] == 163606
    assert (view / "model.safetensors").resolve() == src / "model.safetensors"
    assert json.loads((src / "config.json").read_text()) == {"mask_token_id": 163606}    # the staged copy untouched


def test_the_dspark_setup_script_run_by_steps_sharing_tmp_at_once_leaves_one_whole_view(tmp_path):
    """Steps that share /tmp (no container, or one named container) run the setup script at the same time; with a
    fixed `<view>.tmp` they removed each other's half-built view (on 885a062: 'File exists', a missing folder)."""
    script = REPO / "recipes/configs/kimik3-dspark-config-compat.sh"
    src = tmp_path / "staged"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"mask_token_id": 7}))
    for i in range(20):
        (src / f"model-{i}.safetensors").write_text("w")
    env = {"PATH": os.environ["PATH"], "RACKBENCH_MODEL": "/model", "DSPARK_SRC": str(src),
           "DSPARK_VIEW": str(tmp_path / "view")}
    runs = [subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(6)]
    outs = [p.communicate(timeout=60) for p in runs]
    assert [p.returncode for p in runs] == [0] * 6, outs
    view = tmp_path / "view"
    assert json.loads((view / "config.json").read_text())["pard_token"] == 7
    assert sorted(p.name for p in view.iterdir()) == sorted(["config.json", *(f"model-{i}.safetensors"
                                                                              for i in range(20))])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["staged", "view", "view.lock"]      # no half-built copy


def test_render_shows_the_launch_sequence(repo):
    out = run_cli("render", "tp", cwd=repo).stdout
    order = [out.index(s) for s in ("## etcd (infra)", "## frontend (frontend)", "## worker0 (worker)")]
    assert order == sorted(order)
    worker = out[out.index("## worker0 (worker)"):]
    assert "# preamble, in this step before the process: setup: bash /configs/kimik3-dspark-config-compat.sh " \
           "(only if /model exists); dynamo: python3 /rackbench-tools/dynamo_env.py" in worker
    assert "(unnamed: it and everything written in it vanish with the step)" in worker
    assert "--job-name=rackbench-RUN-tp.worker0" in out               # the step name release signals


def test_stand_in_clusters_skip_the_dynamo_install(catalog):
    for pid in ("tiny-llama-cpu-dynamo", "tiny-llama-cpu-vllm"):
        prof = by_id(catalog, pid)
        assert not any(p.preamble for p in plan(prof, dry_placement(prof)).processes)


@pytest.mark.catalog("kimi-k3")
def test_templates_are_filled_per_node(recipes):
    edit(recipes / "kimi-k3/gb200/_agentx.yaml", "  labels:\n", "  templates: [environment.RUN_LOGS]\n  labels:\n")
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
    assert entrypoint(sp.proc("etcd"), sp.frontend) is None and entrypoint(sp.proc("nats"), sp.frontend) is None


def test_retarget_keeps_the_shape_and_runs_every_step_in_a_container(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    local = retarget(prof, catalog.clusters["gb200-local"])
    assert local.cluster.name == "gb200-local" and local.topology == prof.topology
    req = request_for(local, backend_for(local.cluster), "r", ResultsFolder.at("/tmp/x").profile(local.id),
                      root=str(REPO))
    assert "cpus-per-task" not in req.scheduler.directives
    assert req.scheduler.step_options["container-remap-root"] == ""
    # the recipe's image as one imported file (slurm.images), never a registry name each step would pull
    assert req.container_image == "/var/lib/rackbench-slurm/images/serve.sqsh" and req.stop_grace_s == 60
    assert req.container_mounts[str(REPO / ".venvs")] == str(REPO / ".venvs")      # relative = the repo's
    where = placement_for(local, ["n1"] * 4, ["n1"] * 4, "/w", root=str(REPO))
    found = login_findings(local, where, req.dropped)
    # one finding per image not imported yet (a session importing them beside this one leaves one of the two)
    missing = sum(not os.path.isfile(f) for f in (req.container_image, where.infra_image))
    assert [f.check for f in found] == ["imported image"] * missing + ["slurm options"]
    with pytest.raises(ConfigError, match="cluster slurm-local has 4 nodes x 1 GPUs"):
        retarget(prof, catalog.clusters["slurm-local"])


def test_login_preflight_names_each_missing_image_file_named_or_mapped(catalog, tmp_path):
    """pyxis fails a step whose --container-image file is missing: the login check names each, whether the cluster maps
    the image's name to it (slurm.images) or names the file itself (the infra's image on gb200-local)."""
    serve, infra = tmp_path / "serve.sqsh", tmp_path / "infra.sqsh"
    serve.write_bytes(b"hsqs")
    cl = catalog.clusters["gb200-local"]
    cl = cl.model_copy(update={
        "slurm": cl.slurm.model_copy(update={"images": {"vllm/vllm-openai:kimi-k3": str(serve)}}),
        "runtime": cl.runtime.model_copy(update={"infra": cl.runtime.infra.model_copy(update={"image": str(infra)})})})
    local = retarget(by_id(catalog, "kimi-k3-gb200-dep"), cl)
    where = placement_for(local, ["n1"] * 4, ["n1"] * 4, "/w", root=str(REPO))
    assert where.image == str(serve) and where.infra_image == str(infra)
    found = login_findings(local, where)
    assert [(f.check, f.message.split(",")[0]) for f in found] == [("imported image", str(infra))]
    serve.unlink()
    infra.write_bytes(b"hsqs")
    found = login_findings(local, where)
    assert [(f.check, f.message.split(",")[0]) for f in found] == [("imported image", str(serve))]
    assert "rackbench stage kimi-k3-gb200-dep --images" in found[0].fix


def test_each_step_is_a_pyxis_container_with_the_recipes_environment_over_the_images(catalog):
    """As gb200-nv runs them: every step names the imported image (etcd/NATS their own), the profile's mounts, and in
    --container-env the names of its own environment, which pyxis would otherwise let the image's ENV override (the
    values travel in srun's environment, never on the command line); a variable the recipe unsets is unset inside.
    The stand-in's node-local disks are pyxis mounts of each node's folder, not a wrapper around the program; the
    image's entrypoint never runs, every step starts in /, and only a step that installs into the image asks for a
    writable root (#52: gb200-local carries Dynamo, so none does)."""
    from rackbench.server.assembly import Assembly
    prof = retarget(by_id(catalog, "kimi-k3-gb200-dep_offload"), catalog.clusters["gb200-local"])
    _, alloc, sp = Assembly(prof, ResultsFolder.at("/tmp/x"), "RUN", root=REPO, dry=True).render()
    by_name = {p.name: p for p in alloc.processes}
    assert {"etcd", "nats", "frontend", "worker0", "worker3"} <= set(by_name), sorted(by_name)
    for proc in alloc.processes:
        cmd = proc.command
        args = cmd[:cmd.index("--")]
        image = [a for a in args if a.startswith("--container-image=")]
        want = "infra" if proc.role == "infra" else "serve"
        assert image == [f"--container-image=/var/lib/rackbench-slurm/images/{want}.sqsh"], (proc.name, args)
        mounts = next(a.split("=", 1)[1].split(",") for a in args if a.startswith("--container-mounts="))
        assert f"/var/lib/rackbench-slurm/node-disk/{proc.node}/numa1:/mnt/numa1" in mounts, mounts
        assert not [m for m in mounts if m.startswith("/mnt/numa1")], mounts      # read from the node's own disk
        assert "--no-container-entrypoint" in args and "--container-workdir=/" in args
        assert "--container-writable" not in args
        assert "unshare" not in cmd
        assert not [a for a in cmd for k in proc.env if a.startswith(f"{k}=")], proc.name   # no value in argv
        named = next((a.split("=", 1)[1].split(",") for a in args if a.startswith("--container-env=")), [])
        assert named == sorted(k for k, v in proc.env.items() if v is not None), proc.name
    # a results folder under /tmp is mounted; the containers' own /tmp paths beside it (DeepGEMM's cache, the DSpark
    # view) are not node paths (8 false refusals of this launch before)
    assert unmet_needs(sp) == []
    worker = by_name["worker0"]
    named = next(a for a in worker.command if a.startswith("--container-env="))
    assert {"DSPARK_SRC", "VLLM_HOST_IP"} <= set(named.split("=", 1)[1].split(","))


@pytest.mark.parametrize("frontend", ["vllm", "dynamo"])
def test_every_planned_server_binds_its_nodes_address_never_every_interface(catalog, frontend):
    """etcd, NATS, the Dynamo frontend, vLLM's API server and the workers' side servers listened on 0.0.0.0; each now
    binds the address of its node (loopback on this machine). Only vLLM's KV-event publisher keeps its wildcard
    endpoint (vLLM connects, not binds, to any other)."""
    from rackbench.server.assembly import dry_plan
    profiles = [p for p in catalog.profiles if p.recipe.frontend.type == frontend]
    assert profiles
    for prof in profiles:
        where, sp = dry_plan(prof)
        for proc in sp.processes:
            words = [*proc.argv, *(str(v) for v in proc.env.values())]
            assert not [w for w in words if "0.0.0.0" in w or "[::]" in w], (prof.id, proc.name, words)
            assert not [w for w in words if "tcp://*" in w and "kv_cache_events" not in w], (prof.id, proc.name)
            host = where.addresses[proc.rank]
            if proc.name == "etcd":
                assert proc.argv[proc.argv.index("--listen-client-urls") + 1].startswith(f"http://{host}:")
                assert proc.argv[proc.argv.index("--listen-peer-urls") + 1].startswith(f"http://{host}:")
            if proc.name == "nats":
                assert proc.argv[proc.argv.index("-a") + 1] == host
            if "--host" in proc.argv:
                assert proc.argv[proc.argv.index("--host") + 1] == host
            if "--http-host" in proc.argv:
                assert proc.argv[proc.argv.index("--http-host") + 1] == host
            if frontend == "dynamo" and proc.role == "worker":
                assert proc.env["DYN_SYSTEM_HOST"] == proc.env["DYN_TCP_RPC_HOST"] == host


def test_a_dynamo_that_names_the_response_streams_interface_gets_one(catalog):
    """Dynamo 1.4.0 reads DYN_TCP_RESPONSE_STREAM_HOST as an interface's name: given 127.0.0.1 its frontend never
    registered the model ("Interface not found: 127.0.0.1"), and the H200 lease of 2026-12-04 spent 18 min on two
    points that never started; the GB200 recipes pin 1.3.0. Their plans now name the interface (lo here, the cluster's
    NCCL interface on a cluster, else Dynamo's own choice); Dynamo 1.6.1's keep the address."""
    import dataclasses

    from rackbench.catalog.flag_rules import pins
    from rackbench.server.assembly import dry_plan
    from rackbench.server.frontends.dynamo import bound_to
    seen = set()
    for prof in [p for p in catalog.profiles if p.recipe.frontend.type == "dynamo"]:
        where, sp = dry_plan(prof)
        old = pins(prof)["dynamo"] in ("1.3.0", "1.4.0")
        for proc in sp.processes:
            if proc.name == "frontend" or (proc.role == "worker" and "DYN_SYSTEM_HOST" in proc.env):
                host = where.addresses[proc.rank]
                named = "lo" if host == "127.0.0.1" else where.interfaces[0]
                assert proc.env.get("DYN_TCP_RESPONSE_STREAM_HOST") == (named if old else host), (prof.id, proc.name)
                seen.add(old)
    assert seen == {True, False}
    (prof,) = [p for p in catalog.profiles if p.id == "llama-7b-h200-dynamo"]
    where, _ = dry_plan(prof)
    named = bound_to("10.0.0.7", prof, dataclasses.replace(where, interfaces=("ib0", None)))
    assert named["DYN_TCP_RESPONSE_STREAM_HOST"] == "ib0"
    assert "DYN_TCP_RESPONSE_STREAM_HOST" not in bound_to("10.0.0.7", prof,
                                                          dataclasses.replace(where, interfaces=(None, None)))


def test_a_port_the_plan_gives_a_node_that_another_job_holds_is_refused_before_the_servers(catalog):
    """On a cluster node shared by two jobs the fixed ports clashed; the node's preflight now binds each port the
    plan gives its servers (etcd/NATS, started before it, aside) and names the holder of one that is taken."""
    import socket
    import sys

    from rackbench.server.assembly import dry_plan
    from rackbench.server.preflight import requests
    from rackbench.tools import PREFLIGHT
    (prof,) = [p for p in catalog.profiles if p.id.endswith("-dep_offload") and p.cluster.name == "gb200-nv"]
    where, sp = dry_plan(prof)
    reqs = requests(prof, sp, where)
    kinds = {p["kind"] for p in reqs[0]["ports"]}
    assert {"frontend", "system", "dp_rpc"} <= kinds and not kinds & {"etcd", "etcd_peer", "nats"}
    assert {p["port"] for p in reqs[0]["ports"]} == {p for _, h, p in sp.ports if h == where.addresses[0]} - \
        {p for w, _, p in sp.infra} - {p for k, _, p in sp.ports if k == "etcd_peer"}
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        req = {"node": "n1", "rank": 0, "ports": [{"kind": "frontend", "port": port}]}
        done = subprocess.run([sys.executable, str(PREFLIGHT), json.dumps(req)], capture_output=True, text=True,
                              timeout=60)
    (problem,) = json.loads(done.stdout.splitlines()[-1])["problems"]
    assert problem["kind"] == "ports" and problem["message"].startswith(f"port {port} (frontend) is taken on this node")
    assert "unpin it" in problem["fix"]


def test_the_client_reads_the_cache_stage_fills_in_a_session_and_in_preflight(catalog, tmp_path):
    """Without runtime.client.cache the client's cache is the results folder's shared .hf-cache, the one `rackbench
    stage --results-dir` fills: a session's profile folder is <results>/runs/<id>/<profile> and read a per-run cache
    before (<results>/runs/<id>/.hf-cache, never staged)."""
    prof = retarget(by_id(catalog, "kimi-k3-gb200-dep_offload"), catalog.clusters["gb200-local"])
    staged = ResultsFolder.at(tmp_path).hf_cache                     # what `rackbench stage` fills
    session = ResultsFolder.for_run(tmp_path, "20261203-RUN").profile(prof.id).root
    preflight = ResultsFolder.at(tmp_path).profile(prof.id).root
    for workdir in (session, preflight):
        where = placement_for(prof, ["n1"] * 4, ["n1"] * 4, str(workdir), root=str(REPO))
        assert where.client.cache == str(staged), workdir


def test_a_client_whose_container_never_started_is_said_so_not_that_its_files_did_not_come_back(tmp_path):
    """A client step whose container did not start (a missing mount, an image that is not there) wrote nothing; it
    was reported as a results folder the login host cannot read (FilesNotBack), which sent one to the wrong fix."""
    from rackbench.load.client import ClientSetupFailed, check_after
    from rackbench.load.generator import Invocation
    from rackbench.server.steps import ClientSpec
    log = tmp_path / "aiperf.log"
    log.write_text("slurmstepd-n1: error: pyxis: container start failed: mount source /mnt/numa1/models/Kimi-K3 "
                   "does not exist on this node (enroot: No such file or directory)\n"
                   "srun: error: n1: task 0: Exited with exit code 1\n")
    inv = Invocation(["aiperf"], {}, tmp_path / "out", log, tmp_path / "cmd")
    client = ClientSpec("head", "n1", "python3", "/rackbench-tools", None, "/cache", "/tmp", "/model")
    with pytest.raises(ClientSetupFailed, match="the client's container did not start on n1, so the load generator "
                       "never ran: slurmstepd-n1: error: pyxis: container start failed: mount source /mnt/numa1"):
        check_after(client, inv, 1, wrote=False)


@pytest.mark.catalog("kimi-k3", "local")
def test_launch_problems_come_in_the_same_pass_as_another_recipes_problems(recipes):
    """A broken recipe elsewhere in the catalog held the launch-plan check back until it was fixed: a second run
    then found the launch problem. `rackbench matrix` now says both, and checks the plans of the valid profiles."""
    edit(recipes / "clusters/gb200-nv.yaml", "DSPARK_SRC: /models/Kimi-K3-DSpark",
         "DSPARK_SRC: /mnt/numa1/models/Kimi-K3-DSpark")
    edit(recipes / "local/_sweep.yaml", "  gates:\n", "  waive:\n    capacity: no reason\n  gates:\n")
    res = run_cli("--recipes", str(recipes), "matrix")
    assert res.returncode == 1 and "waive.capacity" in res.stderr, res.stderr
    assert "kimi-k3-gb200-dep: worker0: environment DSPARK_SRC names /mnt/numa1" in res.stderr
    assert "recipe problem(s) and" in res.stdout and "launch problem(s) above" in res.stdout


def test_a_step_that_installs_dynamo_into_the_image_asks_for_a_writable_root(catalog):
    """#52: gb200-nv's recipe installs Dynamo into the vLLM image (dynamo.install); enroot's root is read-only by
    default, so that pip install failed with EROFS on the cluster unless the step passes --container-writable."""
    from rackbench.server.assembly import Assembly
    prof = by_id(catalog, "kimi-k3-gb200-tp")
    assert prof.recipe.dynamo.install and prof.cluster.runtime.dynamo_install
    _, alloc, _ = Assembly(prof, ResultsFolder.at("/tmp/x"), "RUN", root=REPO, dry=True).render()
    workers = [p for p in alloc.processes if p.role in ("worker", "headless", "frontend")]
    assert workers and all("--container-writable" in p.command[:p.command.index("--")] for p in workers)
