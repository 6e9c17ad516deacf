"""Preflight of the Kimi K3 GB200 profiles, for real: sbatch + srun steps on scripts/slurm-local's virtual nodes
shaped like gb200-nv (recipes/clusters/gb200-local.yaml), each step in a pyxis container (the pyxis model: the
stand-in image with the serving venv mounted), etcd + NATS in their own image, the node checks after each worker's
preamble in the worker's container. It must find what cannot exist off-cluster and nothing else."""

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from rackbench.catalog.loader import Catalog
from tests.conftest import REPO, by_id, edit, run_cli
from tests.test_slurm import processes_with, squeue

pytestmark = [pytest.mark.slurm, pytest.mark.local]   # local: the serving venv (scripts/install-servers)
SERVE_PY = REPO / ".venvs/serve/bin/python"


@pytest.fixture
def serve_venv():
    if not SERVE_PY.exists():
        pytest.skip(f"{SERVE_PY} missing: run scripts/install-servers")


def blocks(stdout: str) -> dict[str, list[str]]:
    out, current = {}, None
    for line in stdout.splitlines():
        if line.startswith("kimi-k3-gb200-"):
            current = line.split(":")[0]
            out[current] = [line]
        elif current:
            out[current].append(line)
    return out


def kinds(lines: list[str]) -> set[str]:
    return {m.group(1) for ln in lines if not ln.startswith("  note:")
            if (m := re.match(r"  .*?: (\w+): ", ln))}


NODE_DISKS = [Path(f"/var/lib/rackbench-slurm/node-disk/n{i}/numa1/models") for i in range(1, 5)]   # gb200-local


@pytest.fixture
def bare_nodes():
    """gb200-local's nodes with nothing staged on their disks, as a fresh gb200-nv allocation's could be."""
    for disk in NODE_DISKS:
        shutil.rmtree(disk, ignore_errors=True)
    yield
    for disk in NODE_DISKS:
        shutil.rmtree(disk, ignore_errors=True)


def test_a_rehearsal_of_the_offload_arm_meets_what_a_first_gb200_run_would(slurm, serve_venv, bare_nodes, tmp_path):
    """`rackbench rehearse`: the widest of the seed's layouts, DEP16 with the CPU tier, on four Slurm nodes with every
    step in a pyxis container as on gb200-nv (the pyxis model), twice.
    1. Bare nodes: enroot refuses a container whose mount source is missing, so no step starts (etcd, NATS, workers,
       client) and each said only 'no answer'; preflight looks on each node first, without a container, and names
       each folder with its fix.
    2. A Kimi-shaped stand-in staged where gb200-nv stages the model (rackbench/data/standin): the DSpark setup
       script runs in each worker's container, the node checks after it, the tokenizer copy (a remote-code tokenizer
       whose module imports its siblings) and the client check in the client's container on the head node; what is
       left cannot exist off-cluster: the recipe's own job options and pins, and the corpus (no Hub access here).
    The stand-in is removed afterwards and nothing is left running."""
    res = run_cli("rehearse", "dep_offload", "--on", "gb200-local", "--installs", "stand-in", "--results-dir", tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert out.startswith("kimi-k3-gb200-dep_offload rehearsed on gb200-local (nodes n1, n2, n3, n4), with "
                          "gb200-local's prebuilt environments:"), out
    bare, staged = out.split("\n", 1)[1].split("\n2. with the stand-in staged on every node (Kimi-K3, "
                                                "Kimi-K3-DSpark; ")
    (lines,) = blocks("\n".join(ln.removeprefix("   ") for ln in bare.splitlines())).values()
    assert kinds(lines[1:]) == {"image", "model", "mount"}, bare
    text = "\n".join(lines)
    assert "n1, n2, n3, n4: model: container mount: /mnt/numa1/models/Kimi-K3 does not exist on this node: enroot " \
           "refuses to start a container that mounts it" in text and "(fix: stage the model on every node" in text
    assert "n1, n2, n3, n4: mount: container mount: /mnt/numa1/models/Kimi-K3-DSpark does not exist on this node" \
           in text and "(fix: stage /mnt/numa1/models/Kimi-K3-DSpark on every node, or drop the mount" in text
    assert "note: checks not run: no container of the profile can start where a mount source is missing" in text
    (lines,) = blocks("\n".join(ln.removeprefix("   ") for ln in staged.splitlines())).values()
    assert kinds(lines[1:]) == {"image", "corpus"}, staged
    text = "\n".join(lines)
    assert "dynamo 1.6.1 here, the recipe pins 1.3.0" in text
    assert "n1 (rank 0): corpus: corpus: semianalysis_cc_traces_weka_062126 (semianalysisai/cc-traces-weka-062126) " \
           f"does not load offline from {tmp_path}/.hf-cache" in text
    assert f"rackbench stage kimi-k3-gb200-dep_offload --cache {tmp_path}/.hf-cache" in text
    logs = tmp_path / "kimi-k3-gb200-dep_offload" / "logs"
    assert {p.name for p in logs.iterdir()} >= {"etcd.log", "nats.log", "preflight0.log", "client-check.log"}
    # the setup script built the DSpark view in the worker's own container, before the node's checks ran there
    assert "kimik3-dspark-config-compat: /tmp/Kimi-K3-DSpark -> /models/Kimi-K3-DSpark (pard_token 163838)" in \
        (logs / "preflight3.log").read_text()
    assert not [d for d in NODE_DISKS for name in ("Kimi-K3", "Kimi-K3-DSpark") if (d / name).exists()], \
        "the stand-in was left on the nodes"
    assert squeue("rackbench-preflight-") == [] and processes_with(str(tmp_path)) == []


def test_a_rehearsal_with_the_clusters_own_installs_stops_before_sbatch_where_a_first_run_would(slurm, tmp_path):
    """#52 item 5: by default the rehearsal takes gb200-nv's own installs (the Dynamo install at the recipe's
    commit, the client's environment made in the image, etcd/NATS binaries from shared storage) instead of the
    stand-in's prebuilt environments. Dynamo at a source commit is built once into the shared cache, with GitHub,
    git and cargo; none has built it here, so a first run stops before sbatch, naming the build and its fix; no job
    is queued."""
    res = run_cli("rehearse", "dep_offload", "--results-dir", tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert out.startswith("kimi-k3-gb200-dep_offload rehearsed on gb200-local (nodes n1, n2, n3, n4), with its own "
                          "cluster's installs:"), out
    assert "login: build: build from source: Dynamo from source (git+https://github.com/ai-dynamo/dynamo.git@" \
           f"ba83080ecd31c1ce918559e576d3c5bc9e092ff1) is not built in the shared cache ({tmp_path}/.hf-cache/dynamo/" \
           in out and "(fix: build it once before the job: rackbench stage kimi-k3-gb200-dep_offload --dynamo" in out
    assert "a first run stops here, before sbatch; to rehearse past it here: --installs stand-in" in out
    assert "2. with the stand-in staged" not in out and squeue("rackbench-preflight-") == []
    assert not (tmp_path / "kimi-k3-gb200-dep_offload" / "logs").exists()       # no step ran


def test_stage_builds_the_pinned_dynamo_once_in_a_one_node_job_in_the_recipes_image(slurm, serve_venv, catalog,
                                                                                    tmp_path, monkeypatch):
    """#52 item 1: `rackbench stage --dynamo` builds the recipe's Dynamo into the shared cache's wheelhouse in a
    one-node srun job, in the recipe's image through real pyxis, with the interpreter the steps install with; the
    before-sbatch finding then goes, and a second stage runs no job. A wheel made here stands for the commit's build
    (this machine does not reach GitHub)."""
    from rackbench.cli.components import build_dynamo
    from rackbench.core.results_folder import ResultsFolder
    from rackbench.server import login_checks, preflight
    from rackbench.server.assembly import Assembly
    from rackbench.server.frontends import dynamo
    from tests.conftest import wheel
    prof = preflight.retarget(by_id(catalog, "kimi-k3-gb200-dep_offload"), catalog.clusters["gb200-local"], True)
    results = ResultsFolder.at(tmp_path / "results")
    req = Assembly(prof, results, "RUN").request()
    assert [f.check for f in login_checks.unbuilt_dynamo(prof, req)] == ["build from source"]
    built = wheel(results.hf_cache / "dynamo" / "src", "sbdyn", "1.0", "the commit")
    monkeypatch.setattr(dynamo, "dynamo_requirements", lambda profile: [str(built)])
    assert build_dynamo([prof], results) == 0
    (house,) = [p for p in (results.hf_cache / "dynamo").iterdir() if p.name.startswith("sbdyn-")
                and p.suffix != ".lock"]
    assert json.loads((house / "requirements.json").read_text()) == ["sbdyn-1.0-py3-none-any.whl"]
    assert (house / ".rackbench-env").read_text().startswith("cpython 3.")
    assert login_checks.unbuilt_dynamo(prof, req) == []
    deadline = time.monotonic() + 60            # srun has returned; Slurm may still list the job as COMPLETING
    while squeue("rackbench-dynamo-build") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert squeue("rackbench-dynamo-build") == []
    monkeypatch.setattr("subprocess.run", lambda *a, **k: pytest.fail(f"a second build ran {a}"))
    assert build_dynamo([prof], results) == 0


def test_a_port_the_recipe_pins_held_by_another_session_is_one_finding(slurm, serve_venv, bare_nodes, tmp_path):
    """The GB200 recipes pin the DP RPC port (13345); on this host another session may hold it. Preflight says so in
    one line with the holder, releases the nodes, and prints no traceback."""
    import socket
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 13345))
        holder.listen()
    except OSError:
        holder.close()
        pytest.skip("port 13345 is already taken here (another session): the case this test makes")
    try:
        res = run_cli("preflight", "dep_offload", "--on", "gb200-local", "--results-dir", tmp_path)
    finally:
        holder.close()
    assert res.returncode == 1 and "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr
    assert "login: ports: pinned port: port 13345 (dp_rpc, pinned by the recipe) is taken on this machine by" \
        in res.stdout, res.stdout
    assert squeue("rackbench-preflight-") == []


def test_the_node_check_catches_a_bare_scheduler_class(serve_venv, recipes, tmp_path):
    """The seed's `scheduler-cls: AsyncScheduler` parses, then kills the engine. The node check imports it in the
    node's environment (here the serving venv, run as preflight runs it on each node; past the offline rule,
    which catches it too) and names the dotted path that exists there."""
    import json
    import subprocess

    from rackbench.server.placement import placement_for
    from rackbench.server.plan import plan
    from rackbench.server.preflight import requests
    from rackbench.tools import PREFLIGHT

    edit(recipes / "kimi-k3/gb200/base.yaml", "scheduler-cls: vllm.v1.core.sched.async_scheduler.AsyncScheduler",
         "scheduler-cls: AsyncScheduler")
    cat = Catalog.load(recipes, skip_rules={"object-flags"})
    prof = by_id(cat, "kimi-k3-gb200-tp")
    where = placement_for(prof, ["n1", "n2", "n3", "n4"], ["n1", "n2", "n3", "n4"], str(tmp_path))
    req = {**requests(prof, plan(prof, where), where)[1], "parse": [], "imports": [], "endpoints": []}  # objects
    assert req["objects"] == [{"flag": "scheduler-cls", "value": "AsyncScheduler"}]
    req["objects"].append({"flag": "scheduler-cls", "value": "vllm.v1.core.sched.async_scheduler.AsyncScheduler"})
    done = subprocess.run([str(SERVE_PY), str(PREFLIGHT), json.dumps(req)], capture_output=True, text=True,
                          timeout=300)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    (found,) = [p for p in answer["problems"] if p["kind"] == "object"]      # the dotted path resolves there
    assert "'AsyncScheduler' is not a dotted path" in found["message"]
    assert found["fix"] == "write the dotted path, e.g. vllm.v1.core.sched.async_scheduler.AsyncScheduler"


def test_a_hardware_run_preflights_first_and_starts_no_server(slurm, serve_venv, bare_nodes, pytester, tmp_path):
    """`pytest -m gb200 --cluster <it>`: preflight runs before any server; its problems fail the profile's cases
    with the per-node lines, no frontend or worker ever starts, and nothing is left running."""
    from tests.conftest import copy_suite

    copy_suite(pytester.path)
    (pytester.path / ".venvs").symlink_to(REPO / ".venvs")
    edit(pytester.path / "recipes/kimi-k3/gb200/_agentx.yaml", "cluster: gb200-nv", "cluster: gb200-local")
    out = tmp_path / "results"
    res = pytester.runpytest_subprocess("benchmarks", "-m", "gb200", "-k", "kimi-k3-gb200-tp-c1", "--cluster",
                                        "gb200-local", "--results-dir", str(out))
    res.assert_outcomes(errors=1)                    # the deployment fixture fails: the case never measures
    res.stdout.fnmatch_lines(["*servers did not come up: kimi-k3-gb200-tp: preflight found * problem(s)*",
                              "*model: container mount: /mnt/numa1/models/Kimi-K3 does not exist on this node*"])
    manifest = (out / "latest" / "manifest.json").read_text()
    assert '"server_starts": []' in manifest
    logs = {p.name for p in (out / "latest" / "kimi-k3-gb200-tp" / "logs").iterdir()}
    # the mount look ran first, on the nodes themselves; no container was tried, etcd's and NATS's neither
    assert logs == {f"mounts{i}.log" for i in range(4)}, logs
    assert squeue("kimi-k3") == [] and squeue("-tp") == []
    assert processes_with(str(out)) == []


