"""Preflight of the four Kimi K3 GB200 profiles, for real: sbatch + srun steps on scripts/slurm-local's virtual
nodes shaped like gb200-nv (recipes/clusters/gb200-local.yaml), etcd + NATS, the node checks after each worker's
preamble in the worker's step, in the serving venv that stands in for the image. It must find what cannot exist
off-cluster and nothing else."""

import re

import pytest

from servebench.catalog.loader import Catalog
from tests.conftest import REPO, by_id, edit, run_cli
from tests.test_slurm import processes_with, squeue

pytestmark = pytest.mark.slurm
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


def test_the_offload_arm_finds_only_what_cannot_exist_off_cluster(slurm, serve_venv, tmp_path):
    """The widest of the seed's layouts, DEP16 with the CPU tier (a DP rank group per node, the offload connector),
    preflighted on four Slurm nodes (~50 s on two cores): every node's check, the client's check on the head node,
    and the cleanup. TP16's and TEP16's leader + headless followers run the same per-node checks; their commands
    are covered by the offline render and rule tests."""
    res = run_cli("preflight", "dep_offload", "--on", "gb200-local", "--results-dir", tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    found = blocks(res.stdout)
    assert sorted(found) == ["kimi-k3-gb200-dep_offload"], res.stdout
    for profile, lines in found.items():
        # the model and the image cannot exist off-cluster; the corpus cannot be staged from here (no Hub access)
        assert kinds(lines[1:]) == {"model", "image", "corpus"}, "\n".join(lines)
        text = "\n".join(lines)
        assert "n1 (rank 0), n2 (rank 1), n3 (rank 2), n4 (rank 3): model: model directory (--model): " \
               "/mnt/numa1/models/Kimi-K3 does not exist on this node" in text
        assert "the recipe runs in vllm/vllm-openai:kimi-k3" in text and "dynamo 1.6.1 here, the recipe pins 1.3.0" in text
        # the client's environment, checked on the head node in the client's own step: AIPerf imports and parses
        # the first point's command (no client finding), the corpus is not in the shared cache and says how to stage
        assert f"n1 (rank 0): corpus: corpus: semianalysis_cc_traces_weka_062126 (semianalysisai/cc-traces-weka-062126) " \
               f"does not load offline from {tmp_path}/.hf-cache" in text
        assert f"servebench stage {profile} --cache {tmp_path}/.hf-cache" in text
        assert "note: n1: tokenizer not run: /mnt/numa1/models/Kimi-K3 does not exist on this node" in text
        # the DSpark view needs the model: the worker's preamble skipped the setup script, said so, and the check ran
        assert "note: n1, n2, n3, n4: setup not run: /mnt/numa1/models/Kimi-K3 does not exist on this node" in text
    # nothing left: no job, no etcd/NATS/preflight process (their data and logs are under tmp_path)
    assert squeue("servebench-preflight-") == []
    assert processes_with(str(tmp_path)) == []
    for profile in found:
        logs = tmp_path / profile / "logs"
        assert {p.name for p in logs.iterdir()} >= {"etcd.log", "nats.log", "preflight0.log", "client-check.log"}
        # the worker's preamble ran first in the check's step, and said why the setup script did not run
        assert "servebench: setup not run: /mnt/numa1/models/Kimi-K3 does not exist on this node" in \
            (logs / "preflight3.log").read_text()


@pytest.mark.local
def test_the_node_check_catches_a_bare_scheduler_class(serve_venv, recipes, tmp_path):
    """The seed's `scheduler-cls: AsyncScheduler` parses, then kills the engine. The node check imports it in the
    node's environment (here the serving venv, run as preflight runs it on each node; past the offline rule,
    which catches it too) and names the dotted path that exists there."""
    import json
    import subprocess

    from servebench.server.placement import placement_for
    from servebench.server.plan import plan
    from servebench.server.preflight import requests
    from servebench.tools import PREFLIGHT

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


def test_a_hardware_run_preflights_first_and_starts_no_server(slurm, serve_venv, pytester, tmp_path):
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
                              "*model: model directory (--model): /mnt/numa1/models/Kimi-K3 does not exist*"])
    manifest = (out / "latest" / "manifest.json").read_text()
    assert '"server_starts": []' in manifest
    logs = {p.name for p in (out / "latest" / "kimi-k3-gb200-tp" / "logs").iterdir()}
    assert "preflight0.log" in logs and not any(n.startswith(("frontend", "worker")) for n in logs)
    assert squeue("kimi-k3") == [] and squeue("-tp") == []
    assert processes_with(str(out)) == []

