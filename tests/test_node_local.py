"""The stand-in as strict as gb200-nv about what the login side can see (marker `slurm`): a cluster's node-local
disk (slurm.node_local) exists only inside its node's steps, as a compute node's NVMe does; the session's own
process sees none of it. A client placed on the login side that reads the model from such a disk fails before it
starts, as the seed's did after the model had loaded; placed on the head node (the default) it measures; a results
folder the login side cannot read fails the point saying its files did not come back."""

import dataclasses
import shutil
import socket
import sys
from pathlib import Path

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.catalog.points import Point
from rackbench.core.results_folder import ResultsFolder
from rackbench.load.aiperf import AiperfGenerator
from rackbench.load.client import ClientSetupFailed, FilesNotBack
from rackbench.load.measure import MeasurementFailed, measure
from rackbench.server.assembly import Assembly
from rackbench.server.generated import ensure_model
from rackbench.server.plan import Engine, ProcSpec, ServerPlan
from tests.conftest import REPO, by_id, edit

pytestmark = pytest.mark.slurm
DISK = "/mnt/rackbench-node-disk"
AIPERF = REPO / ".venvs/aiperf/bin/aiperf"
SERVE_PY = REPO / ".venvs/serve/bin/python"
FAKE = Path(__file__).with_name("fakeserver.py")


@pytest.fixture
def node_local(slurm, tmp_path, recipes):
    """slurm-local with a node-local disk at DISK, backed per node by a folder under tmp_path."""
    backing = tmp_path / "node-disk"
    edit(recipes / "clusters/slurm-local.yaml", "slurm:\n", f"slurm:\n  node_local:\n    {DISK}: {backing}/{{node}}\n")
    edit(recipes / "local/_sweep.yaml", "duration_s: 20", "duration_s: 6")
    return by_id(Catalog.load(recipes), "tiny-llama-cpu-dynamo_slurm"), backing


def step(alloc, rank, name, argv, tmp_path):
    proc = alloc.launch(rank, name, argv, {}, tmp_path / f"{name}.log", role="preflight", oneshot=True)
    proc.popen.wait(timeout=60)
    return proc.popen.returncode, proc.tail()


def test_a_node_local_disk_is_seen_only_by_its_nodes_steps(node_local, tmp_path):
    prof, backing = node_local
    assembly = Assembly(prof, ResultsFolder.at(tmp_path / "results"), "nl", root=REPO)
    alloc = assembly.allocate()
    try:
        assert step(alloc, 0, "write", ["sh", "-c", f"echo here > {DISK}/f"], tmp_path)[0] == 0
        assert step(alloc, 0, "again", ["cat", f"{DISK}/f"], tmp_path) == (0, "here")   # the node's disk persists
        assert step(alloc, 1, "other", ["test", "-e", f"{DISK}/f"], tmp_path)[0] == 1   # another node's disk
    finally:
        alloc.release()
    assert not Path(DISK, "f").exists()                                                 # nor on the login side
    assert (backing / alloc.nodes[0] / "f").read_text() == "here\n"


def fake_deployment(prof, tmp_path, model: str):
    """A fake server as a step on node 0 (the client is what is measured here), with the profile's client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assembly = Assembly(prof, ResultsFolder.at(tmp_path / "results"), "nl", root=REPO)
    alloc = assembly.allocate()
    _, sp = assembly.plan(alloc)
    url = f"http://127.0.0.1:{port}"
    proc = ProcSpec(0, "fake", "worker", (sys.executable, str(FAKE), "--port", str(port)), {})
    fake = ServerPlan("vllm", "tiny", url, (proc,), (Engine(0, 0, f"{url}/metrics", "0"),), (f"{url}/health",), 1,
                      client=dataclasses.replace(sp.client, model=model))
    try:
        return assembly.start(alloc, None, fake)
    except BaseException:
        alloc.release()
        raise


def measured(prof, dep, results: Path):
    folder = ResultsFolder.at(results)
    return measure(Point(prof, 2), dep, AiperfGenerator(str(AIPERF)), folder.case(prof.id, f"{prof.id}-c2"),
                   run_id="nl")


@pytest.mark.local                  # AIPerf's venv (scripts/install-servers)
@pytest.mark.parametrize("placement", ["head", "login"])
def test_the_client_reads_a_node_local_model_only_from_a_node(node_local, tmp_path, placement):
    if not AIPERF.exists() or not SERVE_PY.exists():
        pytest.skip("run scripts/install-servers")
    prof, backing = node_local
    model = ensure_model("tiny-llama", str(SERVE_PY), tmp_path / "gen.log")
    for node in ("n1", "n2", "n3", "n4"):              # staged on every node's disk, as gb200-nv's models are
        shutil.copytree(model, backing / node / "tiny", ignore=shutil.ignore_patterns("*.safetensors"))
    dep = fake_deployment(prof, tmp_path, f"{DISK}/tiny")
    if placement == "login":
        dep.plan = dataclasses.replace(dep.plan, client=dataclasses.replace(dep.plan.client, on="login",
                                                                             node="login"))
    try:
        if placement == "head":
            m = measured(prof, dep, tmp_path / "results")
            assert m.records.summary and m.records.requests          # AIPerf ran on n1 and its files are here
            return
        with pytest.raises(MeasurementFailed) as failed:
            measured(prof, dep, tmp_path / "results")
    finally:
        dep.allocation.release()
    cause = failed.value.__cause__
    assert isinstance(cause, ClientSetupFailed), cause
    assert f"no tokenizer in {DISK}/tiny as this host sees it" in str(cause)
    assert "tokenizer failed with exit code 2" in str(cause) and "was not started (the client on login)" in str(cause)


@pytest.mark.local
def test_a_results_folder_the_login_side_cannot_read_fails_the_point_saying_so(node_local, tmp_path):
    if not AIPERF.exists() or not SERVE_PY.exists():
        pytest.skip("run scripts/install-servers")
    prof, backing = node_local
    model = ensure_model("tiny-llama", str(SERVE_PY), tmp_path / "gen.log")
    shutil.copytree(model, backing / "n1" / "tiny", ignore=shutil.ignore_patterns("*.safetensors"))
    dep = fake_deployment(prof, tmp_path, f"{DISK}/tiny")
    try:
        with pytest.raises(MeasurementFailed) as failed:
            measured(prof, dep, Path(DISK) / "results")        # written on n1's disk, read on the login side
    finally:
        dep.allocation.release()
        shutil.rmtree(Path(DISK) / "results", ignore_errors=True)
    cause = failed.value.__cause__
    assert isinstance(cause, FilesNotBack), cause
    assert f"the load generator ran on n1 and wrote into {DISK}/results/" in str(cause)
    assert "put the results folder on storage the nodes and this host share" in str(cause)
    assert (backing / "n1" / "results").is_dir()               # there it is, on the node's disk
