"""Faults a user meets (#24), each made real: two sessions on one results folder, a server killed under a point, a
session killed with its allocation held, a disk that refuses a write, a point interrupted. Real vLLM, real AIPerf
and the real local Slurm; skipped with the reason without them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rackbench.core.results_folder import ResultsFolder
from rackbench.history.rows import runs
from rackbench.history.store import connect
from rackbench.results import requests as request_file
from tests.conftest import REPO, before_short_summary, copy_suite, edit

pytestmark = pytest.mark.local


def suite(dest: Path, duration: int = 10) -> Path:
    """The suite checked out in ``dest`` with the installed servers, its local points shortened."""
    if not (REPO / ".venvs/serve/bin/python").exists() or not (REPO / ".venvs/aiperf/bin/aiperf").exists():
        pytest.skip("run scripts/install-servers")
    copy_suite(dest)
    (dest / ".venvs").symlink_to(REPO / ".venvs")
    edit(dest / "recipes/local/_sweep.yaml", "duration_s: 20", f"duration_s: {duration}")
    return dest


def session(where: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "benchmarks", *args],
                            cwd=where, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True, **kw)


@pytest.mark.slurm
def test_three_sessions_at_once_each_measure_their_own_server(pytester, slurm):
    """Two local sessions and a Slurm-backed one on one machine, with the same --results-dir (two people on a login
    node; scripts/test while scripts/bench runs). The second starts once the first's vLLM has bound its API port and
    is still loading (it listens a minute later): before, its probe took that same port, and one session's load
    generator replayed against the other's server and passed. Each now measures its own server: its own port, the
    process on it carries its deployment's token, its server's log holds exactly its own requests, and the
    server's counters account for its client's tokens; each writes its own run folder and all reach the history."""
    where = suite(pytester.path)
    local = ("-m", "local and not slurm", "-k", "tiny-llama-cpu-vllm-c1", "--results-dir", "out")
    first = session(where, *local)
    worker_logs = where / "out/runs"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(worker_logs.glob("*/tiny-llama-cpu-vllm/logs/worker0.log")):
        time.sleep(0.5)
    time.sleep(5)                                  # its server has its port and is loading the engine
    second = session(where, *local)
    third = session(where, "-m", "slurm", "-k", "vllm_slurm-c2", "--results-dir", "out")
    outs = [p.communicate(timeout=900)[0] for p in (first, second, third)]
    codes = [p.returncode for p in (first, second, third)]
    if codes != [0, 0, 0]:      # each failed session's own failure section, whole (an assertion message is cut)
        pytest.fail("\n\n".join(f"session {i + 1} exited {code}:\n{out[max(0, out.find('= FAILURES =')):][-6000:]}"
                                  for i, (code, out) in enumerate(zip(codes, outs)) if code), pytrace=False)
    run_dirs = sorted((where / "out/runs").iterdir())
    assert len(run_dirs) == 3
    seen = []
    for run in run_dirs:
        folder = ResultsFolder.at(run)
        (case,) = [p.stem for p in folder.points.glob("*.json")]
        profile = case.rsplit("-c", 1)[0]
        point = json.loads(folder.point(case).read_text())
        manifest = json.loads(folder.manifest.read_text())
        assert point["identity"]["run_id"] == manifest["run_id"] == run.name
        assert point["verdict"]["passed"] and point["requests"]["successful"] > 0
        (own,) = [c for c in point["verdict"]["checks"] if c["name"] == "own_server"]
        assert own["ok"] and abs(point["output_token_ratio"] - 1) <= 0.1, own
        (alloc,) = manifest["allocations"]
        worker_log = folder.profile(profile).log("worker0")
        text = worker_log.read_text()
        assert text.count("Starting vLLM server on") == 1                              # its own server, once
        sent = request_file.read(folder.case(profile, case).requests)
        assert text.count('"POST /v1/chat/completions HTTP/1.1" 200') == len(sent)     # its requests, no other's
        deployment = json.loads(folder.profile(profile).deployment.read_text())
        seen.append((run.name, alloc["name"], worker_log.stat().st_ino, deployment["api_url"]))
    assert all(len({s[i] for s in seen}) == 3 for i in (1, 2, 3)), seen   # three allocations, logs, API ports
    with connect(where / "out/history.sqlite", create=False) as con:
        stored = {r["run_id"]: r["points"] for r in runs(con)}
    assert stored == {run.name: 1 for run in run_dirs}


READ_ONLY = {
    # the disk turns read-only after the points are stored, before rackbench writes its summary and manifest
    "at the session's end": """
import subprocess
def pytest_sessionfinish(session):
    subprocess.run(["mount", "-o", "remount,ro", "MOUNT"], check=True)
""",
    # ... or as the case starts, before its point is written
    "before the point": """
import subprocess
def pytest_runtest_setup(item):
    subprocess.run(["mount", "-o", "remount,ro", "MOUNT"], check=True)
"""}


@pytest.mark.parametrize("when", list(READ_ONLY))
def test_a_disk_that_turns_read_only_is_one_line_and_keeps_what_was_written(pytester, catalog, when):
    """The results folder's file system goes read-only (or full) before the session's summary and manifest, or
    before a case writes its point: one line names the file and the cause (each case one line of its own, #35), no
    traceback hides the cases' outcome, what was stored is whole, and no empty or torn summary.md is left."""
    if os.geteuid() != 0 or subprocess.run(["which", "mount"], capture_output=True).returncode:
        pytest.skip("needs root and mount(8) for a small file system of its own")
    from tests.conftest import by_id
    copy_suite(pytester.path)
    out = pytester.path / "out"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(out)], check=True)
    try:
        (pytester.path / "conftest.py").write_text((pytester.path / "conftest.py").read_text() +
                                                   READ_ONLY[when].replace("MOUNT", str(out)))
        prior = pytester.path / "prior" / "points"
        prior.mkdir(parents=True)
        r = json.loads((REPO / "tests/data/results-local/points/tiny-llama-cpu-vllm-c1.json").read_text())
        r["identity"]["recipe_fingerprint"] = by_id(catalog, "tiny-llama-cpu-vllm").fingerprint
        (prior / "tiny-llama-cpu-vllm-c1.json").write_text(json.dumps(r))
        res = pytester.runpytest_subprocess("benchmarks", "-m", "local and not slurm", "-k", "vllm-c1",
                                            "--reuse-results", str(prior.parent), "--results-dir", str(out),
                                            "-p", "no:cacheprovider")
        text = res.stdout.str() + res.stderr.str()
        assert "Traceback" not in text and "INTERNALERROR" not in text and "def sb_" not in text, text
        run = ResultsFolder.at(out)
        assert not run.summary.exists() and not list(run.root.rglob(".*.tmp"))
        if when == "before the point":
            res.assert_outcomes(errors=1)
            (line,) = [ln for ln in before_short_summary(text).splitlines()     # CI=true repeats it in the summary
                       if "tiny-llama-cpu-vllm-c1: results not written: " in ln]
            assert "the file system is read-only" in line and "what was written before is kept" in line, text
            return
        res.assert_outcomes(passed=1)
        lines = [ln for ln in text.splitlines() if ln.startswith("results not written: cannot write ")]
        assert len(lines) == 1 and "the file system is read-only" in lines[0], text
        assert json.loads(run.point("tiny-llama-cpu-vllm-c1").read_text())["verdict"]["passed"]
    finally:
        subprocess.run(["umount", "-l", str(out)], capture_output=True)


KILL_API_SERVER = '''
import os, signal, threading, pathlib
import pytest

@pytest.fixture(autouse=True)
def kill_the_api_server_mid_point(request):
    if "sb_point" not in request.fixturenames:
        yield
        return
    dep = request.getfixturevalue("sb_deployment")
    worker = next(p for p in dep.allocation.processes if p.role == "worker")
    pathlib.Path("PGID").write_text(str(worker.popen.pid))     # the leader: vLLM's API server
    threading.Timer(6, os.kill, (worker.popen.pid, signal.SIGKILL)).start()
    yield
'''


def test_a_killed_api_server_fails_its_point_once_and_leaves_no_engine_behind(pytester):
    """SIGKILL of vLLM's API server while AIPerf drives it (an OOM kill of the front process): the point fails
    saying the server died, with its log tail once; release stops the whole process group although its leader is
    gone, so no EngineCore is left holding memory and ports after the session."""
    from rackbench.core.processes import group_alive
    where = suite(pytester.path, duration=30)
    (where / "conftest.py").write_text((where / "conftest.py").read_text() + KILL_API_SERVER)
    res = session(where, "-m", "local and not slurm", "-k", "tiny-llama-cpu-vllm-c1", "--results-dir", "out")
    out = res.communicate(timeout=600)[0]
    assert res.returncode == 1, out
    pgid = int((where / "PGID").read_text())
    assert not group_alive(pgid), f"process group {pgid} (vLLM's engine) outlived the session"
    body = before_short_summary(out)
    failure = [ln for ln in body.splitlines() if "tiny-llama-cpu-vllm-c1: the server died during the point" in ln]
    assert len(failure) == 1 and "worker0 on node local0 (rank 0) killed by SIGKILL" in failure[0], out
    assert body.count("tail of") == 1 and "worker0 on node local0 exited (-9); tail of" in out, out  # once
    stored = json.loads(ResultsFolder.at(where / "out").point("tiny-llama-cpu-vllm-c1").read_text())
    assert stored["verdict"]["passed"] is False and stored["run"]["server_died"].startswith("worker0")


TIME_OUT_MID_POINT = '''
import signal
import pytest

@pytest.fixture(autouse=True)
def time_out_mid_point(request):
    if "sb_point" in request.fixturenames:
        request.getfixturevalue("sb_deployment")       # the server up: the timer is set to fire 6 s into the point
        signal.setitimer(signal.ITIMER_REAL, 6)
    yield
'''


def test_a_timeout_mid_point_is_one_line_and_the_cut_point_never_enters_the_history(pytester):
    """#54: a pytest --timeout firing mid-point printed 159 lines (thread stacks, the fixtures' source) and the cut
    point entered the history as a measurement, unjudged, with 43 request rows. Now: one line, the partial point
    kept in its case folder marked interrupted, and the history holds no row of it."""
    where = suite(pytester.path, duration=30)
    (where / "conftest.py").write_text((where / "conftest.py").read_text() + TIME_OUT_MID_POINT)
    res = session(where, "-m", "local and not slurm", "-k", "tiny-llama-cpu-vllm-c1", "--results-dir", "out",
                  "-p", "pytest_timeout", "--timeout", "900")
    out = res.communicate(timeout=600)[0]
    assert res.returncode == 1, out
    body = before_short_summary(out)
    assert "Timeout" not in body.replace("--timeout", "") and "Traceback" not in body and "def sb_" not in body, out
    said = [ln for ln in body.splitlines() if ln.startswith("test_point[tiny-llama-cpu-vllm-c1]: pytest --timeout "
                                                              "900 s ran out during the case")]
    assert len(said) == 1 and "kept out of the history" in said[0], out
    assert body.count("tail of") == 0, out
    stored = json.loads(ResultsFolder.at(where / "out").point("tiny-llama-cpu-vllm-c1").read_text())
    assert stored["run"]["interrupted"] is True, stored["run"]
    assert "history: " not in out or "0 point(s) added" in out or "history not updated" in out, out
    history = where / "out" / "history.sqlite"
    if history.exists():
        with connect(history) as con:
            assert con.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 0


def test_the_install_says_one_line_per_component_and_keeps_pip_in_its_log():
    """A newcomer's first minutes: scripts/install-servers names each component as it starts and when it is ready
    (here: already installed), and pip's own output stays in .venvs/install-<name>.log."""
    if not (REPO / ".venvs/serve/.rackbench-installed").exists() or \
            not (REPO / ".venvs/aiperf/.rackbench-installed").exists():
        pytest.skip("run scripts/install-servers")
    out = subprocess.run([str(REPO / "scripts/install-servers")], capture_output=True, text=True, timeout=1200)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and out.stderr == "", out
    assert sorted(ln.split(":")[1].strip() for ln in lines) == ["aiperf", "aiperf", "serve", "serve"], lines
    assert all(ln.startswith("install-servers: ") for ln in lines) and len(lines) == 4, lines
    assert sum("installing (log: .venvs/install-" in ln for ln in lines) == 2
    assert sum(ln.endswith(" s)") and ("up to date" in ln or "ready: " in ln) for ln in lines) == 2, lines


def test_a_server_log_the_full_disk_cannot_take_is_not_copied_cut_and_says_so(tmp_path):
    """On a full results disk the copy of a 19,813-byte server log was cut at 4,096 bytes, without a word."""
    from types import SimpleNamespace

    from rackbench.plugin import keep_logs
    if os.geteuid() != 0 or subprocess.run(["which", "mount"], capture_output=True).returncode:
        pytest.skip("needs root and mount(8) for a small file system of its own")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(small)], check=True)
    try:
        big, fits = tmp_path / "worker0.log", tmp_path / "frontend.log"
        big.write_text("x" * 19_813)
        fits.write_text("started\n")
        case = ResultsFolder.at(small).case("p", "p-c1")
        procs = [SimpleNamespace(name="frontend", rank=0, log=fits), SimpleNamespace(name="worker0", rank=0, log=big)]
        missed = keep_logs(procs, case)
        assert missed == [f"cannot write {case.server_log('worker0', 0)}: the disk is full; the original is still {big}"]
        assert case.server_log("frontend", 0).read_text() == "started\n"          # what fits is kept whole
        assert not case.server_log("worker0", 0).exists() and not list(case.server_logs.glob(".*.tmp"))
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)
