"""The cluster layer against a real Slurm controller (scripts/slurm-local: 4 nodes x 4 fake GPUs).

Counts are read from Slurm (squeue, sacct -c) and the process table, never from the suite's bookkeeping.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from rackbench.cluster import AllocationRequest, ClusterError, ProcessDied, SchedulerOptions
from rackbench.core.results_folder import ResultsFolder
from tests.conftest import before_short_summary, edit, run_cli

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parent.parent


def squeue(name_part: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if name_part in ln]


def sacct_jobs(name_part: str) -> list[str]:
    out = subprocess.run(["sacct", "-c", "-n", "-P", "-o", "JobID,JobName,State"], capture_output=True, text=True,
                         check=True).stdout
    return [ln for ln in out.splitlines() if name_part in ln]


def processes_with(token: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if token.encode() in (d / "cmdline").read_bytes() or token.encode() in (d / "environ").read_bytes():
                    stat = (d / "stat").read_text().split()
                    if stat[2] != "Z":
                        pids.append(int(d.name))
            except OSError:
                pass
    return [p for p in pids if p != os.getpid()]


def wait_for(pred, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


SERVER = ("import http.server, os, socketserver, sys\n"
          "port = int(os.environ['SB_PORT'])\n"
          "print('node', os.environ.get('SLURMD_NODENAME'), 'gpus', os.environ.get('CUDA_VISIBLE_DEVICES'),"
          " 'port', port, flush=True)\n"
          "http.server.ThreadingHTTPServer(('127.0.0.1', port), http.server.SimpleHTTPRequestHandler).serve_forever()\n")


def free_port_base(n=4) -> int:
    import socket
    while True:
        base = 20000 + (uuid.uuid4().int % 20000)
        ok = True
        for i in range(n):
            with socket.socket() as s:
                ok &= s.connect_ex(("127.0.0.1", base + i)) != 0
        if ok:
            return base


def test_four_nodes_one_process_each_on_distinct_ports(slurm, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    req = AllocationRequest(name=token, nodes=4, gpus_per_node=4, scheduler=SchedulerOptions(partition="debug"),
                            workdir=tmp_path)
    alloc = slurm.allocate(req, timeout=300)     # other tests may hold the nodes (-n 2)
    base = free_port_base()
    try:
        assert alloc.nodes == ["n1", "n2", "n3", "n4"]
        assert len(squeue(token)) == 1 and squeue(token)[0].endswith("RUNNING")
        procs = [alloc.launch(r, "http", [sys.executable, "-c", SERVER, token], {"SB_PORT": str(base + r)},
                              tmp_path / f"n{r}.log") for r in range(4)]

        def all_up():
            try:
                return all(urllib.request.urlopen(f"http://127.0.0.1:{base + r}/", timeout=2).status == 200
                           for r in range(4))
            except OSError:
                return False
        wait_for(all_up, 60, "4 servers")
        seen = sorted(p.log.read_text().split()[1] for p in procs)
        assert seen == ["n1", "n2", "n3", "n4"]
        assert all("gpus 0,1,2,3" in p.log.read_text() for p in procs)
    finally:
        alloc.release()
    assert squeue(token) == []
    wait_for(lambda: not processes_with(token), 15, "processes to exit")
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{base}/", timeout=2)


def test_killed_node_process_is_reported_with_its_log_tail(slurm, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    alloc = slurm.allocate(AllocationRequest(name=token, nodes=4, gpus_per_node=4, workdir=tmp_path), timeout=300)
    try:
        code = "import os, time; print('worker up on', os.environ['SLURMD_NODENAME'], flush=True); time.sleep(600)"
        for r in range(4):
            alloc.launch(r, "worker", [sys.executable, "-c", code, f"{token}-rank{r}"], {}, tmp_path / f"w{r}.log")
        wait_for(lambda: all("worker up" in (tmp_path / f"w{r}.log").read_text() for r in range(4)), 60, "workers")
        alloc.check()  # all alive
        victims = processes_with(f"{token}-rank2")
        assert victims
        for pid in victims:
            if "python" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[0]:
                os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alloc.processes[2].alive(), 30, "srun of rank 2 to notice")
        with pytest.raises(ProcessDied) as err:
            alloc.check()
        assert "node n3" in str(err.value) and "worker up on n3" in str(err.value)
    finally:
        alloc.release()
    assert squeue(token) == []
    wait_for(lambda: not processes_with(token), 15, "processes to exit")


def test_a_process_whose_job_ended_first_says_the_jobs_end_not_its_own_exit(slurm, tmp_path):
    """#35: a job ended under its processes (the heartbeat's end, scancel, `scripts/slurm-local stop`) failed the
    point with "the server died ... exited with code 0"; the cause was only in the sbatch log. The process's end now
    says the job ended first, how, and what the job's own log said last."""
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    alloc = slurm.allocate(AllocationRequest(name=token, nodes=1, workdir=tmp_path), timeout=300)
    try:
        code = "import time; print('worker up', flush=True); time.sleep(600)"
        proc = alloc.launch(0, "worker", [sys.executable, "-c", code, f"{token}-rank0"], {}, tmp_path / "w0.log")
        wait_for(lambda: "worker up" in proc.log.read_text(), 60, "the worker")
        subprocess.run(["scancel", alloc.job_id], check=True)
        wait_for(lambda: not proc.alive(), 60, "srun to see its job end")
        with pytest.raises(ProcessDied) as err:
            alloc.check()
        assert "worker on node n1 (rank 0) exited with code" in err.value.line
        assert f"its Slurm job {alloc.job_id} ended first (CANCELLED" in err.value.line, err.value.line
    finally:
        alloc.release()
    assert squeue(token) == []


def test_unschedulable_job_is_cancelled_not_left_pending(slurm, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ClusterError, match="can never start"):
        slurm.allocate(AllocationRequest(name=token, nodes=5, workdir=tmp_path), timeout=30)
    assert squeue(token) == []


@pytest.fixture
def slurm_suite(pytester, slurm):
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(REPO / name, pytester.path / name)
    shutil.copytree(REPO / "tests/data/slurm-catalog", pytester.path / "recipes")
    (pytester.path / "benchmarks").mkdir()
    return pytester


HOLD = '''
import os, sys, time, subprocess
def test_point(sb_allocation, sb_point, tmp_path):
    allocation = sb_allocation
    assert subprocess.run(["squeue", "-h", "-j", allocation.job_id, "-o", "%T"], capture_output=True,
                          text=True).stdout.strip() == "RUNNING"
    for r, node in enumerate(allocation.nodes):
        allocation.launch(r, "hold", [sys.executable, "-c", "import time; time.sleep(600)", "TOKEN"], {},
                          tmp_path / f"hold{r}.log")
    time.sleep(float(os.environ.get("HOLD_SECONDS", "0")))
    allocation.check()
'''


def test_one_allocation_per_profile(slurm_suite, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_hold.py").write_text(HOLD.replace("TOKEN", token))
    results = tmp_path / "results"
    res = slurm_suite.runpytest_subprocess("benchmarks", "-q", "--results-dir", str(results))
    res.assert_outcomes(passed=6)
    manifest = json.loads((results / "latest" / "manifest.json").read_text())
    allocs = manifest["allocations"]
    assert [a["profile"] for a in allocs] == ["tiny-cpu-alpha", "tiny-cpu-beta"]
    assert all(a["released_at"] for a in allocs)
    res.stdout.fnmatch_lines(["*2 allocation(s), 0 server start(s)*"])
    # Slurm's own records: two jobs of this run, both ended; nothing left running.
    run = manifest["run_id"]
    wait_for(lambda: len(sacct_jobs(run)) == 2, 15, "jobcomp records")
    assert {a["job_id"] for a in allocs} == {ln.split("|")[0] for ln in sacct_jobs(run)}
    assert squeue(run) == []
    wait_for(lambda: not processes_with(token), 15, "processes to exit")


def nodes_idle() -> bool:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True).stdout.split()
    return bool(out) and all(state == "idle" for state in out)


def hold_programs(token: str) -> list[int]:
    """The held programs themselves (python ... TOKEN), not the srun clients that carry the token too."""
    out = []
    for pid in processes_with(token):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].endswith(b"python"):
                out.append(pid)
        except OSError:
            pass
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_leaves_nothing_behind(slurm_suite, tmp_path, sig):
    # slurmd may still be finishing the previous test's job: a step launched meanwhile can stall in launch
    wait_for(nodes_idle, 60, "idle nodes")
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_hold.py").write_text(HOLD.replace("TOKEN", token))
    results = tmp_path / "results"
    env = {**os.environ, "HOLD_SECONDS": "300"}
    # A test run started in the background (`.ci/run &`, nohup) inherits SIGINT ignored, and Python then leaves
    # it ignored: give the inner pytest the default disposition, as a terminal would, so Ctrl-C reaches it.
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider",
                             "--results-dir", str(results)], cwd=slurm_suite.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    job = None
    try:
        wait_for(lambda: len(hold_programs(token)) >= 4, 180, "the held programs on all four nodes")
        part = next(results.glob("runs/*/manifest.*.json"))
        job = json.loads(part.read_text())["allocations"][0]["job_id"]
        proc.send_signal(sig)
        out = proc.communicate(timeout=180)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            if job:              # the test failed: leave the next test a free cluster
                subprocess.run(["scancel", job], capture_output=True)
    assert proc.returncode != 0, out
    q = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
    assert q == "", f"job {job} still {q}"
    wait_for(lambda: not processes_with(token), 15, "processes to exit")
    manifest = json.loads((results / "latest" / "manifest.json").read_text())
    assert manifest["allocations"][0]["released_at"]


def test_a_sigkilled_session_gives_its_nodes_back_within_the_orphan_bound(slurm_suite, tmp_path):
    """SIGKILL of pytest mid-profile (an OOM kill, a lost CI runner, a dropped login shell): nothing in the session
    runs to release the job, so the holder notices the heartbeat has stopped and ends the job by itself, with every
    step on every node, within slurm.orphan_after_s (+ one check + KillWait); `rackbench jobs` lists the
    allocation the dead session left and, once the job has ended, says it is gone."""
    wait_for(nodes_idle, 60, "idle nodes")
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_hold.py").write_text(HOLD.replace("TOKEN", token))
    edit(slurm_suite.path / "recipes/clusters/slurm-local.yaml", "  partition: debug",
         "  partition: debug\n  orphan_after_s: 20")
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "-k",
                             "alpha-c1", "--results-dir", str(results)], cwd=slurm_suite.path,
                            env={**os.environ, "HOLD_SECONDS": "300"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    job = None
    try:
        wait_for(lambda: len(hold_programs(token)) >= 4, 180, "the held programs on all four nodes")
        part = next(results.glob("runs/*/manifest.*.json"))
        job = json.loads(part.read_text())["allocations"][0]["job_id"]
        listed = run_cli("jobs", "--results-dir", results)
        assert listed.returncode == 0 and job in listed.stdout and "RUNNING" in listed.stdout, listed.stdout
        proc.kill()
        proc.wait(timeout=30)
        killed = time.monotonic()
        def ended():
            return subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip() == ""
        wait_for(ended, 20 + 4 + 5 + 20, "the orphaned job to end itself")
        wait_for(lambda: not processes_with(token), 20, "every step's processes to exit")
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
        if job:
            subprocess.run(["scancel", job], capture_output=True)
    assert took >= 15, f"the job ended {took:.0f} s after the kill: before its bound, not by the heartbeat?"
    log = next(results.glob("runs/*/tiny-cpu-alpha/*.sbatch.log")).read_text()
    assert "no heartbeat from the session" in log, log
    after = run_cli("jobs", "--results-dir", results)
    assert after.returncode == 0 and job in after.stdout and "ended" in after.stdout, after.stdout


def test_xdist_loadgroup_gives_each_profile_its_own_worker_and_allocation(slurm_suite, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_hold.py").write_text(HOLD.replace("TOKEN", token))
    results = tmp_path / "results"
    res = slurm_suite.runpytest_subprocess("benchmarks", "-q", "-n", "2", "--dist", "loadgroup",
                                           "--results-dir", str(results))
    res.assert_outcomes(passed=6)
    allocs = json.loads((results / "latest" / "manifest.json").read_text())["allocations"]
    assert sorted(a["profile"] for a in allocs) == ["tiny-cpu-alpha", "tiny-cpu-beta"]
    assert len({a["job_id"] for a in allocs}) == 2 and all(a["released_at"] for a in allocs)
    assert not list((results / "latest").glob("manifest.*.json")), "worker parts are merged away"
    assert squeue(token) == [] and not processes_with(token)


KILL_ONE = '''
import os, signal, sys, time
def test_point(sb_allocation, sb_point, tmp_path):
    allocation = sb_allocation
    procs = [allocation.launch(r, "worker", [sys.executable, "-c",
             "import os, time; print('serving on', os.environ['SLURMD_NODENAME'], flush=True); time.sleep(600)",
             "TOKEN-" + str(r)], {}, tmp_path / f"w{r}.log") for r in range(4)]
    while not all("serving" in p.log.read_text() for p in procs):
        time.sleep(0.2)
    for d in os.listdir("/proc"):
        try:
            argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if b"TOKEN-1" in argv and b"python" in argv[0]:
            os.kill(int(d), signal.SIGKILL)
    while procs[1].alive():
        time.sleep(0.2)
    allocation.check()
'''


def test_node_process_killed_mid_case_fails_the_case_naming_the_node(slurm_suite, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_kill.py").write_text(KILL_ONE.replace("TOKEN", token))
    results = tmp_path / "results"
    res = slurm_suite.runpytest_subprocess("benchmarks", "-k", "alpha-c1", "--results-dir", str(results))
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*ProcessDied: worker on node n2 (rank 1) exited with code 137 (signal 9: SIGKILL)*", "*serving on n2*"])
    assert before_short_summary(res.stdout.str()).count("serving on n2") == 1      # its log tail once, not again in a report section
    alloc = json.loads((results / "latest" / "manifest.json").read_text())["allocations"][0]
    assert alloc["released_at"]
    kept = results / "latest" / "tiny-cpu-alpha" / "tiny-cpu-alpha-c1" / "server-logs"    # collected before release
    assert sorted(p.name for p in kept.iterdir()) == [f"worker-node{r}.log" for r in range(4)]
    assert "serving on n2" in (kept / "worker-node1.log").read_text()
    q = subprocess.run(["squeue", "-h", "-j", alloc["job_id"]], capture_output=True, text=True).stdout.strip()
    assert q == ""
    wait_for(lambda: not processes_with(token), 15, "processes to exit")


def test_recipe_values_stay_literal_in_the_job_script(slurm, tmp_path):
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    nasty = "x; rm -rf ~ $(touch /tmp/pwned-" + token + ") 'q\" `id`"
    req = AllocationRequest(name=token, nodes=1, workdir=tmp_path,
                            scheduler=SchedulerOptions(directives={"comment": nasty}))
    alloc = slurm.allocate(req, timeout=300)     # other tests may hold the nodes (-n 2)
    try:
        shown = subprocess.run(["scontrol", "show", "job", alloc.job_id], capture_output=True, text=True).stdout
        assert f"Comment={nasty}" in shown
        marker = tmp_path / "argv.txt"
        code = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"
        alloc.launch(0, "echo", [sys.executable, "-c", code, str(marker), nasty], {"SB_VALUE": nasty},
                     tmp_path / "echo.log")
        wait_for(lambda: marker.exists() and marker.read_text() == nasty, 30, "the literal argument")
    finally:
        alloc.release()
    assert not Path(f"/tmp/pwned-{token}").exists()



def test_pytest_timeout_leaves_nothing_behind(slurm_suite, tmp_path, monkeypatch):
    """pytest-timeout's signal method fails the case and unwinds: teardown releases the job and the processes."""
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_hold.py").write_text(HOLD.replace("TOKEN", token))
    monkeypatch.setenv("HOLD_SECONDS", "300")
    results = tmp_path / "results"
    res = slurm_suite.runpytest_subprocess("benchmarks", "-k", "alpha-c1", "-p", "timeout", "--timeout", "20",
                                           "--timeout-method", "signal", "--results-dir", str(results))
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*pytest --timeout 20 s ran out during the case: not a measurement*"])   # one line
    alloc = json.loads((results / "latest" / "manifest.json").read_text())["allocations"][0]
    assert alloc["released_at"]
    assert subprocess.run(["squeue", "-h", "-j", alloc["job_id"]], capture_output=True, text=True).stdout.strip() == ""
    wait_for(lambda: not processes_with(token), 15, "processes to exit")


@pytest.mark.local                  # the serving and AIPerf venvs (scripts/install-servers)
def test_dynamo_with_etcd_nats_and_the_kv_router_over_two_slurm_nodes(slurm, pytester, tmp_path):
    """The embedded default's dynamo_slurm profile for real: sbatch, etcd + NATS (Debian's) started as steps on
    the head node, the frontend with the KV router, two independent workers on two virtual nodes, one AIPerf
    point run as an srun step on the head node (as the seed runs its client) whose files are back on this side;
    afterwards no job and no process of it is left."""
    from tests.conftest import copy_suite

    if not (REPO / ".venvs/serve/bin/python").exists() or not (REPO / ".venvs/aiperf/bin/aiperf").exists():
        pytest.skip("run scripts/install-servers")
    copy_suite(pytester.path)
    for venv in (".venvs",):
        (pytester.path / venv).symlink_to(REPO / venv)
    out = tmp_path / "results"
    res = pytester.runpytest_subprocess("benchmarks", "-k", "dynamo_slurm", "--results-dir", str(out))
    res.assert_outcomes(passed=1)
    logs = out / "latest" / "tiny-llama-cpu-dynamo_slurm" / "logs"
    assert "Initializing KV store discovery backend: Etcd(http://127.0.0.1:" in (logs / "frontend.log").read_text()
    deployment = json.loads((out / "latest" / "tiny-llama-cpu-dynamo_slurm" / "deployment.json").read_text())
    assert len(deployment["engines"]) == 2 and {e["rank"] for e in deployment["engines"]} == {0, 1}
    point = json.loads((out / "latest" / "points" / "tiny-llama-cpu-dynamo_slurm-c4.json").read_text())
    assert point["verdict"]["passed"] and point["requests"]["successful"] > 0 and point["throughput"]["gpus"] == 2
    manifest = json.loads((out / "latest" / "manifest.json").read_text())
    (alloc,) = manifest["allocations"]
    # the virtual nodes share this host: one machine record (a one-shot step before the servers), then the servers,
    # then during the point the host sampler (#34: one step per distinct host) and the client
    assert [p["name"] for p in alloc["processes"]] == ["etcd", "nats", "machine0", "frontend", "worker0", "worker1",
                                                      "hostload", "client"]
    assert alloc["processes"][2]["role"] == "preflight"
    client = alloc["processes"][-1]
    assert client["role"] == "client" and client["node"] == alloc["nodes"][0] and client["rank"] == 0
    case = ResultsFolder.at(out).case("tiny-llama-cpu-dynamo_slurm", "tiny-llama-cpu-dynamo_slurm-c4")
    assert "rackbench: tokenizer: " in case.load_log("aiperf").read_text()   # the tokenizer copy, in the client's step
    assert (case.load_dir("aiperf") / "profile_export_aiperf.json").is_file()  # written on the node, read here
    assert squeue(alloc["name"]) == []
    assert processes_with(alloc["name"]) == []          # every step's tasks carry SLURM_JOB_NAME
    assert processes_with(str(out)) == []               # etcd/NATS data dirs, worker logs


LOSE_NODE = '''
import os, signal, sys, time
def test_point(sb_allocation, sb_point, tmp_path):
    allocation = sb_allocation
    procs = [allocation.launch(r, "worker", [sys.executable, "-c",
             "import time; print('serving', flush=True); time.sleep(600)", "TOKEN-" + str(r)], {},
             tmp_path / f"w{r}.log") for r in range(4)]
    while not all("serving" in p.log.read_text() for p in procs):
        time.sleep(0.2)
    os.kill(int(open("/var/lib/rackbench-slurm/run/slurmd.n2.pid").read()), signal.SIGKILL)   # node n2's daemon
    time.sleep(2)
    allocation.check()
'''


def test_a_lost_node_daemon_fails_cleanly_with_one_verdict_and_the_stuck_job_reported(slurm_suite, tmp_path):
    """slurmd of an allocated node dies (a node lost to its controller): the case ends without a traceback, every
    output agrees on the point's verdict, the processes on the other nodes are stopped, and a job that cannot end
    is reported with what to do. The node's daemon is started again afterwards."""
    wait_for(nodes_idle, 60, "idle nodes")
    token = f"sbtest-{uuid.uuid4().hex[:8]}"
    (slurm_suite.path / "benchmarks/test_lose.py").write_text(LOSE_NODE.replace("TOKEN", token))
    edit(slurm_suite.path / "recipes/tiny/alpha.yaml", "stop_grace_s: 15", "stop_grace_s: 3")   # n2's step: no answer
    # the stuck job is reported after the cluster's release wait (30 s by default; a node lost stays lost far longer)
    edit(slurm_suite.path / "recipes/clusters/slurm-local.yaml", "  partition: debug",
         "  partition: debug\n  release_wait_s: 8")
    results = tmp_path / "results"
    try:
        res = slurm_suite.runpytest_subprocess("benchmarks", "-k", "alpha-c1", "--results-dir", str(results))
        text = res.stdout.str()
        outcome = res.parseoutcomes()
        assert "Traceback" not in text and "INTERNALERROR" not in text, text
        for r in (0, 2, 3):          # n1, n3, n4: stopped at release
            wait_for(lambda: not processes_with(f"{token}-{r}"), 60, f"rank {r}'s process to stop")
        manifest = json.loads((results / "latest" / "manifest.json").read_text())
        (alloc,) = manifest["allocations"]
        summary = (results / "latest" / "summary.md").read_text()
        verdict = "passed" if outcome.get("passed") else "failed"
        assert f"| tiny-cpu-alpha-c1 | {verdict} |" in summary and f"tiny-cpu-alpha-c1 {verdict}" in \
            " ".join(text.split()), (verdict, summary)            # the terminal and summary.md agree
        assert "still" in alloc["release_error"] and "8 s after scancel" in alloc["release_error"], alloc
        assert "does not answer its controller" in alloc["release_error"], alloc     # the stuck job, with what to do
        lines = [ln for ln in text.splitlines() if "not released: job " + alloc["job_id"] in ln]
        assert len(lines) == 1 and "scancel" in lines[0], text
    finally:
        subprocess.run([str(REPO / "scripts/slurm-local"), "start"], capture_output=True, timeout=300)
        wait_for(nodes_idle, 120, "the nodes back")
        subprocess.run(["pkill", "-f", token], capture_output=True)


def test_the_local_slurm_daemons_listen_on_loopback_only(slurm):
    """scripts/slurm-local's controller and node daemons bind 127.0.0.1 (CommunicationParameters NoInAddrAny,
    NoCtldInAddrAny): a test machine does not offer a Slurm controller, with a shared munge key, to its network."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    mine = [ln for ln in out.splitlines() if '"slurmctld"' in ln or '"slurmd"' in ln]
    assert len(mine) >= 5, out                      # slurmctld and four slurmd
    assert all(ln.split()[3].startswith("127.0.0.1:") for ln in mine), mine


def test_a_second_start_uses_the_running_daemons_and_says_so(slurm, tmp_path):
    """While one runs (its PID files there, or the controller's lost), a second `scripts/slurm-local start` starts no
    second controller or munged, and says so; two at once wait on each other."""
    start = [str(REPO / "scripts/slurm-local"), "start"]
    count = lambda name: len(subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout.split())  # noqa: E731
    both = [subprocess.Popen(start, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    said = [p.communicate(timeout=300)[0] for p in both]
    assert [p.returncode for p in both] == [0, 0], said
    assert all("slurm-local: already running (1 slurmctld pid" in s and "nothing started" in s for s in said), said
    pidfile = Path("/var/lib/rackbench-slurm/run/slurmctld.pid")
    kept = pidfile.read_text()
    pidfile.unlink()                                       # a controller whose PID file is gone is still found
    try:
        again = subprocess.run(start, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and "nothing started" in again.stdout, again.stdout + again.stderr
    finally:
        pidfile.write_text(kept)
    assert (count("slurmctld"), count("munged"), count("slurmd")) == (1, 1, 4)
    # a daemon's exited parent that nothing reaped (CI's PID 1 reaps no orphans) is a zombie of the same name: not a
    # second daemon (the CI failure of stop 37: "found 2, 2 and 8")
    zombies = []
    for name in ("slurmctld", "munged", "slurmd"):
        exe = tmp_path / name
        shutil.copy("/bin/true", exe)
        zombies.append(subprocess.Popen([str(exe)]))
    try:
        wait_for(lambda: all(Path(f"/proc/{z.pid}/stat").read_text().split()[2] == "Z" for z in zombies), 10, "zombies")
        again = subprocess.run(start, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and "nothing started" in again.stdout, again.stdout + again.stderr
    finally:
        for z in zombies:
            z.wait()


def test_release_never_cancels_a_job_whose_id_was_reused_by_someone_else(slurm, tmp_path):
    """A results folder's manifest names job N as a rackbench allocation whose session is gone; the controller
    now runs another job under N (ids are reused; results folders are copied between clusters). `rackbench jobs
    --release` reports it as not this suite's and leaves it running; the suite's own job, recorded with its identity
    at submission, is released."""
    from rackbench.cluster.slurm_jobs import job_identity
    def submit(name: str) -> str:
        return subprocess.run(["sbatch", "--parsable", f"--job-name={name}", "-N1", "-o", "/dev/null", "--wrap",
                               "sleep 300"], capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    foreign, ours = submit("someone-elses-training"), submit("rackbench-RUNX-tp")
    try:
        wait_for(lambda: job_identity(ours) is not None and job_identity(foreign) is not None, 30, "both listed")
        run = tmp_path / "results/runs/RUNX"
        run.mkdir(parents=True)
        mine = job_identity(ours)
        stale = {**mine, "name": "rackbench-RUNOLD-tp", "submitted": "2026-01-01T00:00:00"}
        allocations = [{"profile": "tp", "backend": "slurm", "name": "rackbench-RUNOLD-tp", "job_id": foreign,
                        "job": stale, "released_at": None},
                       {"profile": "tp", "backend": "slurm", "name": "rackbench-RUNX-tp", "job_id": ours,
                        "job": mine, "released_at": None}]
        (run / "manifest.json").write_text(json.dumps({"run_id": "RUNX", "allocations": allocations}))
        out = run_cli("jobs", "--release", "--results-dir", tmp_path / "results")
        assert out.returncode == 0, out.stderr
        lines = {ln.split()[1]: ln for ln in out.stdout.splitlines() if ln.startswith("job ")}
        assert "NOT this suite's job, left alone" in lines[foreign] and "someone-elses-training" in lines[foreign]
        assert "released" in lines[ours], out.stdout
        time.sleep(1)
        state = subprocess.run(["squeue", "-h", "-j", foreign, "-o", "%T"], capture_output=True, text=True).stdout
        assert state.strip() in ("RUNNING", "PENDING"), f"the foreign job is gone: {state!r}"
        wait_for(lambda: job_identity(ours) is None, 30, "our own job to end")
    finally:
        subprocess.run(["scancel", foreign, ours], capture_output=True)
