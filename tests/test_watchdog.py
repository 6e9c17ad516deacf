"""The local backend's watchdog (rackbench.cluster.watchdog): a session that dies without releasing its local
allocation (SIGKILL, an OOM kill) leaves nothing running; a released allocation leaves no watchdog behind."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from rackbench.cluster import AllocationRequest
from rackbench.cluster.local import LocalAllocation
from rackbench.cluster.watchdog import watch
from rackbench.core.processes import group_alive
from tests.conftest import REPO

SESSION = textwrap.dedent('''
    import os, pathlib, signal, sys
    sys.path.insert(0, REPO)
    from rackbench.cluster import AllocationRequest
    from rackbench.cluster.local import LocalAllocation
    where = pathlib.Path(WHERE)
    alloc = LocalAllocation(AllocationRequest("orphan", 1, workdir=where, stop_grace_s=2), ["local0"])
    # a server and a child of its own in its group (as vLLM's API server and its EngineCore)
    proc = alloc.launch(0, "worker0", ["sh", "-c", "sleep 300 & exec sleep 300"], {}, where / "worker0.log")
    (where / "PGID").write_text(str(proc.popen.pid))
    os.kill(os.getpid(), signal.SIGKILL)       # the session dies holding it: no release, no atexit
''')


def wait_until(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_a_sigkilled_session_leaves_no_local_process_running(tmp_path):
    script = SESSION.replace("REPO", repr(str(REPO))).replace("WHERE", repr(str(tmp_path)))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == -signal.SIGKILL, res.stderr
    pgid = int((tmp_path / "PGID").read_text())
    try:
        assert wait_until(lambda: not group_alive(pgid), 20), f"process group {pgid} outlived its session"
    finally:
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
    line = (tmp_path / "worker0.log").read_text().strip().splitlines()[-1]
    assert line.startswith("rackbench watchdog: the session ended at ") and f"process group {pgid}" in line


def test_a_released_allocation_ends_its_watchdog_and_the_watchdog_stops_nothing(tmp_path):
    alloc = LocalAllocation(AllocationRequest("kept", 1, workdir=tmp_path, stop_grace_s=2), ["local0"])
    proc = alloc.launch(0, "worker0", ["sleep", "300"], {}, tmp_path / "worker0.log")
    watchdog = alloc._guard.popen
    assert watchdog.poll() is None and os.getpgid(watchdog.pid) != os.getpgid(0)   # a session of its own
    alloc.release()
    assert watchdog.poll() == 0 and not group_alive(proc.popen.pid)
    assert "watchdog" not in (tmp_path / "worker0.log").read_text()
    assert watch(["12 /x.log\n", "released\n"], 1) == [] and watch(["12 /nowhere/x.log\n", "13 /y\n"], 1) == [12, 13]
