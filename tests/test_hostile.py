"""What a reliability engineer attacks: a reused job id, secrets in flag values, engine rules the parsers do not
check, an interrupted point, hostile results files. Each test here fails on the code before its fix."""

from __future__ import annotations

import pytest

from rackbench.cluster.slurm_jobs import IDENTITY, differences

MINE = {"name": "rackbench-20261206-tp", "user": "alice", "submitted": "2026-12-06T06:00:00", "cluster": "gb200"}


def test_a_job_is_ours_only_when_every_recorded_field_agrees():
    assert differences(MINE, dict(MINE)) == []
    for key in IDENTITY:
        said = differences(MINE, {**MINE, key: "other"})
        assert len(said) == 1 and key in said[0] and "other" in said[0]


@pytest.mark.parametrize("recorded, seen", [(None, MINE), ({}, MINE), (MINE, None),
                                            ({**MINE, "cluster": None}, {**MINE, "cluster": None})])
def test_a_job_without_a_full_record_or_no_longer_listed_is_never_ours(recorded, seen):
    assert differences(recorded, seen)


@pytest.mark.catalog("local")
@pytest.mark.parametrize("flags, said, fix", [
    ("      max-num-seqs: 4096\n", "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096) "
     "(max-num-batched-tokens unset: 2048 (vLLM's CPU default for a world of 1)",
     "set max-num-batched-tokens to at least 4096, or max-num-seqs to at most 2048"),
    ("      max-num-seqs: 16\n      max-num-batched-tokens: 8\n", "max_num_batched_tokens (8) must be greater than "
     "or equal to max_num_seqs (16)", "set max-num-batched-tokens to at least 16"),
    ("      max-num-seqs: 16\n      max-num-batched-tokens: 512\n      no-enable-chunked-prefill: true\n"
     "      max-model-len: 1024\n", "max_num_batched_tokens (512) is smaller than max_model_len (1024) with chunked "
     "prefill off", "set max-num-batched-tokens to at least 1024"),
])
def test_the_engines_own_cross_flag_rules_are_checked_before_allocating(recipes, flags, said, fix):
    """#54: `max-num-seqs: 4096` with vLLM's default max-num-batched-tokens passed `matrix` and the real-parser flags
    check, then vLLM refused it at start-up, after the allocation. The rule says the engine's own words and the fix,
    naming the file."""
    from tests.conftest import edit, run_cli
    text = (recipes / "local/base.yaml").read_text()
    edit(recipes / "local/base.yaml", "      max-num-seqs: 16\n", flags)
    assert (recipes / "local/base.yaml").read_text() != text
    res = run_cli("--recipes", recipes, "matrix")
    assert res.returncode != 0 and "local/base.yaml" in res.stderr, res.stderr
    assert "vLLM refuses to start: " + said in res.stderr, res.stderr
    assert fix in res.stderr, res.stderr


# ---- results files and histories as untrusted input (#54 item 6) ----

@pytest.fixture
def results(tmp_path):
    import shutil
    from tests.conftest import REPO
    out = tmp_path / "results"
    shutil.copytree(REPO / "tests/data/noise-local/run-1", out)
    return out


def test_a_deeply_nested_results_file_is_one_line_not_a_recursion_error(results, tmp_path):
    """#54: a 200,000-deep JSON array among a folder's points ended `report` and `history add` in RecursionError."""
    from tests.conftest import run_cli
    (results / "points/deep.json").write_text("[" * 200_000 + "]" * 200_000)
    added = run_cli("history", "add", results, "--db", tmp_path / "h.sqlite")
    assert added.returncode == 0 and "Traceback" not in added.stderr, added.stderr
    assert "deep.json" in added.stdout + added.stderr and "nested deeper than 64 levels" in added.stdout + added.stderr
    report = run_cli("report", results, "--history", tmp_path / "h.sqlite")
    assert report.returncode == 0 and "RecursionError" not in report.stdout + report.stderr, report.stderr
    (results / "points").rename(results / "kept")
    (results / "points").mkdir()
    (results / "points/deep.json").write_text("[" * 200_000 + "]" * 200_000)
    alone = run_cli("history", "add", results, "--db", tmp_path / "h2.sqlite")
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) == 1, alone.stderr


def test_a_case_id_that_climbs_out_of_its_folder_is_refused_and_never_written(results, tmp_path):
    """#54: a case id containing `../` made `report` write outside its folder and `history add` store it."""
    import json
    from tests.conftest import run_cli
    victim = tmp_path / "escape"
    src = next((results / "points").glob("*.json"))
    data = json.loads(src.read_text())
    data["identity"]["case_id"] = f"../../../../{victim.relative_to('/')}"
    (results / "points/evil.json").write_text(json.dumps(data))
    report = run_cli("report", results, "--history", tmp_path / "h.sqlite")
    assert "Traceback" not in report.stderr, report.stderr
    assert not list(tmp_path.rglob("escape*")), list(tmp_path.rglob("escape*"))
    assert "evil.json" in report.stdout + report.stderr + (results / "report/report.md").read_text()
    run_cli("history", "add", results, "--db", tmp_path / "h.sqlite")
    from rackbench.history.store import connect
    with connect(tmp_path / "h.sqlite", create=False) as con:
        ids = [c for (c,) in con.execute("SELECT case_id FROM points")]
    assert ids and not any(".." in c or "/" in c for c in ids), ids
    from rackbench.core.results_folder import ResultsFolder
    with pytest.raises(ValueError, match="cannot name a file or folder"):
        ResultsFolder.at(tmp_path).point("../x")


@pytest.mark.parametrize("damage, said", [
    ("UPDATE metrics SET value = 'abc'", "is not a number: the history was edited or damaged"),
    ("UPDATE points SET result_json = '" + "[" * 5000 + "]" * 5000 + "'", "not a rackbench result"),
    ("UPDATE requests SET ttft_ms = 'slow'", "a value that is not a number"),
    ("DROP TABLE points", "not a rackbench history (no points."),
])
def test_a_history_with_wrong_values_is_one_line(results, tmp_path, damage, said):
    """#54: a history that is valid SQLite with wrong values ended in TypeError (`history noise`) or
    OperationalError (`report`). Each command that reads it says one line and exits 2."""
    import sqlite3
    from tests.conftest import run_cli
    import shutil
    from tests.conftest import REPO
    db = tmp_path / "h.sqlite"
    shutil.copytree(REPO / "tests/data/noise-local/run-2", tmp_path / "run-2")
    assert run_cli("history", "add", results, "--db", db).returncode == 0
    assert run_cli("history", "add", tmp_path / "run-2", "--db", db).returncode == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE points SET result_json = result_json")      # a plain edit first: still readable
    con.execute("DELETE FROM metrics WHERE name = 'output_tps_per_gpu'") if "result_json" in damage else None
    con.execute(damage)
    con.commit()
    con.close()
    outs = [run_cli("history", "noise", "--db", db), run_cli("history", "list", "--db", db)]
    runs = [ln.split()[0] for ln in outs[1].stdout.splitlines() if ln[:1].isdigit()]
    if runs:
        outs.append(run_cli("compare", runs[0], runs[-1], "--db", db))
    failed = [o for o in outs if o.returncode != 0]
    assert failed, [o.stdout for o in outs]
    for o in failed:
        assert o.returncode == 2 and len(o.stderr.strip().splitlines()) == 1 and said in o.stderr, o.stderr
        assert "Traceback" not in o.stderr


def test_a_folder_the_disk_refused_to_make_is_named_as_not_made(tmp_path):
    """#54: a read-only results error named a run folder that does not exist as if it could not be written."""
    import errno
    from rackbench.core.files import disk_problem
    missing = tmp_path / "runs" / "20261206-x"
    said = disk_problem(OSError(errno.EROFS, "Read-only file system", str(missing)))
    assert said.startswith(f"cannot create {missing} in {tmp_path}: ") and "read-only" in said, said
    (tmp_path / "f").write_text("x")
    assert disk_problem(OSError(errno.ENOSPC, "No space", str(tmp_path / "f"))).startswith(f"cannot write {tmp_path}")


def test_a_lock_in_the_shared_cache_can_be_taken_by_a_second_user(tmp_path, monkeypatch):
    """#52: the tokenizer cache's lock file was created 0644 under the first user's umask, so a second user of the
    same shared cache could not open it to lock it. It is made 0666, and taken with a read-only open (all flock
    needs), so even a 0644 one made earlier by someone else can be locked."""
    import fcntl
    import os
    import stat
    from rackbench.tools import FOLDER
    monkeypatch.syspath_prepend(str(FOLDER))           # as the client's interpreter runs it: its folder on the path
    from tokenizer_cache import cache
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    (model / "config.json").write_text("{}")
    old = os.umask(0o077)
    try:
        cache(model, tmp_path / "cache", "m")
    finally:
        os.umask(old)
    (lock,) = (tmp_path / "cache").rglob(".lock")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o666
    lock.chmod(0o444)                                  # another user's, not writable by us: still lockable
    with open(lock) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_the_client_environment_and_the_staged_model_take_locks_a_second_user_can_take(tmp_path, monkeypatch):
    """#52 item 6, the other two locks of the shared cache: the client environment's and a staged model's lock files
    were still opened for appending, so created 0644 under the first user's umask."""
    import os
    import stat
    from rackbench.tools import FOLDER
    monkeypatch.syspath_prepend(str(FOLDER))
    import client_env
    import stage
    monkeypatch.setattr(client_env.subprocess, "call", lambda *a, **k: 0)      # pip: not what this test is about
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")                      # staged already: only the lock is taken
    old = os.umask(0o077)
    try:
        client_env.make(str(tmp_path / "envs" / "aiperf-1"), "pins.txt", ["aiperf==0.13.0"])
        assert stage.stage_model("org/model", str(tmp_path / "model")).endswith("already in " + str(tmp_path / "model"))
    finally:
        os.umask(old)
    for lock in (tmp_path / "envs" / "aiperf-1.lock", tmp_path / "model.lock"):
        assert stat.S_IMODE(lock.stat().st_mode) == 0o666, lock


def test_a_results_folder_without_its_latest_link_reads_its_newest_run(tmp_path):
    """#56: `rackbench report` on a results folder (not a run folder) copied without its `latest` link failed with
    'no points/ folder in it'."""
    import shutil
    from tests.conftest import REPO, run_cli
    for run in ("20261201-101956-1-aaaa", "20261202-101956-1-bbbb"):
        shutil.copytree(REPO / "tests/data/noise-local/run-1/points", tmp_path / "results/runs" / run / "points")
    res = run_cli("report", tmp_path / "results")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "results/runs/20261202-101956-1-bbbb/report/report.md").exists()
