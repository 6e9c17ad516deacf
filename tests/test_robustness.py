"""Defects of the structure review (#21), each on real files and real processes: a torn load-generator summary, an
engine that stops answering, a release that fails, versions compared as text, a command that could not be pasted
back into a shell."""

import json
import logging
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rackbench.catalog.points import Point
from rackbench.cluster import AllocationRequest, ClusterError, release_all
from rackbench.cluster.local import LocalAllocation
from rackbench.core.results_folder import CaseFolder, ProfileFolder
from rackbench.load.generator import Invocation
from rackbench.load.aiperf import AiperfGenerator
from rackbench.server.deploy import Deployment, ServerError, same_release
from rackbench.server.plan import Engine, ProcSpec, ServerPlan
from tests.conftest import REPO, by_id, recorded

H200 = Path(__file__).parent / "data" / "h200"


def test_a_torn_summary_still_gives_a_result_built_from_the_records(catalog, tmp_path):
    """A killed AIPerf can leave profile_export_aiperf.json half-written: the point is built from the per-request
    records, and the result says why (before, building raised inside measure's finally and no result was
    written)."""
    art = tmp_path / "aiperf"
    shutil.copytree(H200 / "ctx16k/offload-c8", art)
    text = (art / "profile_export_aiperf.json").read_text()
    (art / "profile_export_aiperf.json").write_text(text[:len(text) // 2])
    r = recorded(Point(by_id(catalog, "kimi-k3-gb200-dep"), 8), art)
    assert r.requests.successful == 96 and r.requests.completed == 96 and r.run.summary_present is False
    assert any("torn or not JSON" in p for p in r.run.problems), r.run.problems
    assert "aiperf wrote no summary: requests counted from its per-request records" in r.run.problems


def sleeper(tmp_path, port: int) -> Deployment:
    """A "server" that is alive but answers nothing on its metrics port (a hung engine, a closed port)."""
    alloc = LocalAllocation(AllocationRequest("robust", 1, workdir=tmp_path), ["local0"])
    spec = ProcSpec(0, "worker0", "worker", (sys.executable, "-c", "import time; time.sleep(120)"), {})
    url = f"http://127.0.0.1:{port}"
    sp = ServerPlan("vllm", "m", url, (spec,), (Engine(0, 0, f"{url}/metrics", "0"),), (f"{url}/health",), 1)
    dep = Deployment(by_id_profile(), sp, alloc, ProfileFolder(tmp_path))
    dep.processes["worker0"] = alloc.launch(0, "worker0", list(spec.argv), {}, tmp_path / "w.log")
    return dep


def by_id_profile():
    from rackbench.catalog.loader import Catalog
    return by_id(Catalog.load(REPO / "recipes"), "tiny-llama-cpu-vllm")


def test_an_engine_that_stops_answering_is_one_error_naming_the_url(tmp_path):
    from rackbench.server.ports import port_free
    port = next(p for p in range(39100, 39200) if port_free(p))
    dep = sleeper(tmp_path, port)
    try:
        with pytest.raises(ServerError, match=rf"http://127.0.0.1:{port}/metrics does not answer \(ConnectError"):
            dep.wait_idle(timeout=2)
        with pytest.raises(ServerError, match="does not answer"):
            dep.counters()
    finally:
        dep.allocation.release()


def test_a_failed_release_is_said_not_swallowed(tmp_path, caplog):
    class Stuck(LocalAllocation):
        def _give_back(self):
            raise ClusterError("job 4242 still RUNNING 30 s after scancel")
    Stuck(AllocationRequest("stuck", 1, workdir=tmp_path), ["local0"])
    with caplog.at_level(logging.ERROR):
        failed = release_all()
    assert failed == ["local allocation stuck: job 4242 still RUNNING 30 s after scancel"]
    assert "releasing local allocation stuck failed: job 4242 still RUNNING" in caplog.text


@pytest.mark.parametrize("reported, pinned, same", [
    ("0.31.0+cpu", "0.31.0", True), ("1.3", "1.3.0", True), ("1.3.0", "1.3.1", False),
    ("2.11.0", "2.11.0+cu130", False), ("2.11.0+cu130", "2.11.0+cu130", True), ("0.8.0rc1", "0.8.0", False),
])
def test_versions_compare_as_releases(reported, pinned, same):
    assert same_release(reported, pinned) is same


def test_packaging_is_declared_where_it_is_used():
    deps = (REPO / "pyproject.toml").read_text().split("dependencies = [", 1)[1].split("]", 1)[0]
    assert '"packaging' in deps


def test_the_command_file_pastes_back_into_a_shell(tmp_path):
    """It was written with " ".join: an argument with a space or a quote (a JSON flag, a path) split on paste."""
    case = CaseFolder(tmp_path)
    argv = [sys.executable, "-c", "import sys; print(sys.argv[1:])", '{"a": 1}', "two words", "it's"]
    inv = Invocation(argv, {}, case.load_dir("aiperf"), case.load_log("aiperf"), case.load_command("aiperf"))
    assert AiperfGenerator(sys.executable).run(inv, timeout=30) == 0
    line = case.load_command("aiperf").read_text()
    assert shlex.split(line) == argv
    again = subprocess.run(["sh", "-c", line], capture_output=True, text=True)
    assert again.stdout.strip() == repr(argv[3:])


@pytest.mark.parametrize("reason, never", [
    ("PartitionNodeLimit", True), ("InvalidAccount", True), ("QOSMaxNodePerJobLimit", True),
    ("PartitionTimeLimit", True),                            # #52: a --time over the MaxTime was waited on
    ("ReqNodeNotAvail, Reserved for maintenance", False),   # a reservation ends: the job waits, it is not cancelled
    ("ReqNodeNotAvail, UnavailableNodes:n[1-2]", False), ("Resources", False), ("Priority", False),
])
def test_a_transient_pending_reason_waits_and_a_hopeless_one_cancels(reason, never):
    from rackbench.cluster.slurm import never_starts
    assert never_starts("PENDING", reason) is never
    assert never_starts("RUNNING", reason) is False
