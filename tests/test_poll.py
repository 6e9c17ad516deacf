"""The one polling helper, on a fake clock (no sleeping), and the Slurm watcher built on it against a faked
Slurm CLI (squeue / sacct answering from a script), beside the real-controller tests in test_slurm.py."""

import pytest

from rackbench.cluster import ClusterError
from rackbench.cluster import slurm
from rackbench.cluster import slurm_jobs
from rackbench.core.poll import Done, PollTimeout, poll


class Clock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def test_returns_the_value_as_soon_as_done():
    answers = iter(["a", "b", Done(42)])
    clock = Clock()
    assert poll(lambda: next(answers), timeout=60, interval=1, sleep=clock.sleep, clock=clock) == 42
    assert clock.sleeps == [1, 1]


def test_backoff_is_bounded_and_the_timeout_reports_the_last_answer():
    clock = Clock()
    with pytest.raises(PollTimeout) as err:
        poll(lambda: f"pending at {clock.now:.1f}", timeout=60, interval=0.5, backoff=2, max_interval=8,
             what="job 7", sleep=clock.sleep, clock=clock)
    assert clock.sleeps[:6] == [0.5, 1, 2, 4, 8, 8]
    assert clock.now == pytest.approx(60)          # never sleeps past the deadline
    assert "job 7: still waiting after 60 s (last: pending at" in str(err.value)


def test_probe_exceptions_end_the_wait():
    def probe():
        raise ValueError("process died")
    with pytest.raises(ValueError, match="process died"):
        poll(probe, timeout=60, sleep=lambda s: None)


class FakeSlurm:
    """squeue/sacct/scancel answering from scripted outputs; records every call."""

    def __init__(self, squeue=(), sacct=(), sacct_c=()):
        self.squeue, self.sacct, self.sacct_c = list(squeue), list(sacct), list(sacct_c)
        self.calls = []

    def __call__(self, argv, timeout=30.0):
        self.calls.append(argv[0] + (" -c" if "-c" in argv else ""))
        src = {"squeue": self.squeue, "sacct": self.sacct_c if "-c" in argv else self.sacct}.get(argv[0], [])
        out = src.pop(0) if len(src) > 1 else (src[0] if src else "")
        return type("Done", (), {"returncode": 0, "stdout": out, "stderr": ""})()


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        f = FakeSlurm(**kw)
        monkeypatch.setattr(slurm, "_run", f)
        monkeypatch.setattr(slurm_jobs, "_run", f)        # job_state's owner
        clock = Clock()
        monkeypatch.setattr(slurm, "poll", lambda probe, **k: poll(probe, **k, sleep=clock.sleep, clock=clock))
        return f
    return install


def test_running_job_returns_its_nodes(fake):
    f = fake(squeue=["PENDING|Resources|", "PENDING|Priority|", "RUNNING|None|n[1-4]"])
    assert slurm.SlurmBackend._wait_running("7", timeout=60) == "n[1-4]"
    assert f.calls == ["squeue"] * 3


def test_a_job_squeue_forgot_is_read_from_accounting(fake):
    """An empty squeue answer is not 'ended': sacct says whether the job runs (e.g. squeue lagging, or a
    controller restart) or how it ended."""
    f = fake(squeue=[""], sacct=["RUNNING|n[1-2]"])
    assert slurm.SlurmBackend._wait_running("7", timeout=60) == "n[1-2]"
    assert f.calls == ["squeue", "sacct"]
    fake(squeue=["PENDING|Resources|", ""], sacct=["Slurm accounting storage is disabled"],
         sacct_c=["FAILED|n1"])
    with pytest.raises(ClusterError, match=r"job 7 ended \(FAILED\) before it ran"):
        slurm.SlurmBackend._wait_running("7", timeout=60)


def test_never_schedulable_job_is_refused_at_once(fake):
    fake(squeue=["PENDING|PartitionNodeLimit|"])
    with pytest.raises(ClusterError, match="can never start: pending with reason PartitionNodeLimit"):
        slurm.SlurmBackend._wait_running("7", timeout=60)


def test_pending_job_times_out_with_its_state(fake):
    f = fake(squeue=["PENDING|Resources|"])
    with pytest.raises(ClusterError, match=r"job 7 still PENDING \(Resources\) after 60 s"):
        slurm.SlurmBackend._wait_running("7", timeout=60)
    # backoff: 0.5 s growing to 10 s means about a dozen calls in a minute, not 200 (0.3 s polling)
    assert len(f.calls) <= 15


def test_release_signals_steps_by_tier_workers_before_infra(monkeypatch, tmp_path):
    """Release TERMs each process's Slurm step (scancel --signal=TERM --full JOB.STEP), frontend and workers
    first, etcd/NATS after them, then cancels the job. A faked Slurm CLI stands in; 'sleep' is the step."""
    import sys

    from rackbench.cluster import AllocationRequest
    from rackbench.cluster.slurm import SlurmAllocation

    calls, procs = [], {}

    def fake_run(argv, timeout=30.0):
        calls.append(argv)
        out = ""
        if argv[:2] == ["squeue", "-h"] and "-s" in argv:
            out = "\n".join(f"7.{i}|{name}" for i, name in enumerate(procs) if procs[name].poll() is None)
        elif argv[0] == "scancel" and argv[1].startswith("--signal="):
            step = argv[-1]
            name = [n for i, n in enumerate(procs) if f"7.{i}" == step][0]
            procs[name].terminate()                       # what slurmd does to the step's tasks
        return type("Done", (), {"returncode": 0, "stdout": out, "stderr": ""})()

    monkeypatch.setattr(slurm, "_run", fake_run)
    monkeypatch.setattr(slurm, "job_state", lambda job: (None, ""))
    req = AllocationRequest("job", 2, workdir=tmp_path, stop_grace_s=30)
    alloc = SlurmAllocation(req, ["n1", "n2"], "7")
    monkeypatch.setattr(alloc, "_command", lambda node, argv, env, name, image=None: argv)
    for rank, name, role in ((0, "etcd", "infra"), (0, "nats", "infra"), (0, "frontend", "frontend"),
                             (0, "worker0", "worker"), (1, "worker1", "worker"), (1, "worker1", "worker")):
        p = alloc.launch(rank, name, [sys.executable, "-c", "import time; time.sleep(60)"], {},
                         tmp_path / f"{name}.log", role=role)
        procs[f"job.{p.step}"] = p.popen
    alloc.release()
    signalled = [c[-1] for c in calls if c[0] == "scancel" and c[1] == "--signal=TERM"]
    order = {step: i for i, step in enumerate(signalled)}
    assert set(order) == {f"7.{i}" for i in range(6)}                      # every step, duplicates included
    assert max(order["7.2"], order["7.3"], order["7.4"], order["7.5"]) < min(order["7.0"], order["7.1"])
    assert all(p.poll() is not None for p in procs.values()) and calls[-1] == ["scancel", "7"]
    assert not any(c[1] == "--signal=KILL" for c in calls if c[0] == "scancel")   # TERM sufficed: no grace spent
