"""The results history (SQLite) and comparisons with confidence, on real H200 runs of the same point: the suite's
first H200 run (tests/data/h200-suite-run, main 9e0aca9) and this repository's (tests/data/h200-gpu-run)."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import contextlib

from rackbench.core.results_folder import ResultsFolder
from rackbench.history import queries
from rackbench.load.aiperf import records as aiperf_records
from rackbench.results import requests as request_file
from rackbench.history import rows
from rackbench.history import store as history
from rackbench.history.compare import compare_point
from rackbench.results import files
from rackbench.results import metrics as registry
from tests.conftest import run_cli

DATA = Path(__file__).parent / "data"
CASE, PROFILE = "llama-770m-h200-vllm-c8", "llama-770m-h200-vllm"


def runs(db) -> list[dict]:
    with contextlib.closing(history.connect(db, create=False)) as con:
        return rows.runs(con)


def results(tmp_path, name, result_json: Path, records: Path) -> Path:
    """A results folder as a session leaves it: points/<case>.json and the point's AIPerf records."""
    d = tmp_path / name
    (d / "points").mkdir(parents=True)
    shutil.copy(result_json, d / "points" / f"{CASE}.json")
    shutil.copytree(records, d / PROFILE / CASE / "aiperf")
    return d


@pytest.fixture
def two_runs(tmp_path):
    old = results(tmp_path, "old", DATA / "h200-suite-run/vllm-c8/result-as-judged-then.json", DATA / "h200-suite-run/vllm-c8")
    new = results(tmp_path, "new", DATA / "h200-gpu-run/points/llama-770m-h200-vllm-c8.json", DATA / "h200-gpu-run/aiperf/vllm-c8")
    return tmp_path / "h.sqlite", old, new


def test_adding_a_run_records_its_points_and_requests_once(two_runs):
    db, old, new = two_runs
    first = history.add(db, new, commit="abc123")
    again = history.add(db, new, commit="abc123")
    assert (first.points, first.already, again.points, again.already) == (1, 0, 0, 1)
    con = sqlite3.connect(db)
    (n_req,) = con.execute("SELECT COUNT(*) FROM requests").fetchone()
    summary = json.loads((DATA / "h200-gpu-run/aiperf/vllm-c8/profile_export_aiperf.json").read_text())
    assert n_req == summary["request_count"]["avg"]                      # every profiled request, once
    assert runs(db)[0]["git_commit"] == "abc123"
    stored = dict(con.execute("SELECT name, value FROM metrics"))          # every metric of the registry, by name
    from rackbench.results import metrics as registry
    assert set(stored) == set(registry.METRICS) and stored["output_tps_per_gpu"] == pytest.approx(571.0, abs=0.1)


def test_a_corrupt_store_or_a_foreign_folder_is_refused_and_loses_nothing(two_runs, tmp_path):
    db, old, new = two_runs
    history.add(db, new)
    before = db.read_bytes()
    (tmp_path / "foreign").mkdir()
    for bad in (tmp_path / "foreign", tmp_path / "missing"):
        with pytest.raises(ValueError, match="no points/ folder|no such folder"):
            history.add(db, bad)
    (tmp_path / "empty" / "points").mkdir(parents=True)
    with pytest.raises(ValueError, match="no valid result"):
        history.add(db, tmp_path / "empty")
    assert db.read_bytes() == before
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database at all " * 100)
    res = run_cli("history", "add", new, "--db", junk)
    assert res.returncode == 2 and "not a rackbench history" in res.stderr and "Traceback" not in res.stderr


def test_a_history_damaged_under_its_header_is_one_line_everywhere_and_never_written(two_runs):
    """#35: pages overwritten with the header intact made history list, noise, compare and report end in
    sqlite3.DatabaseError tracebacks while history add reported success. Every command now says what is wrong with
    the file and what to do, and nothing writes to it."""
    db, old, new = two_runs
    history.add(db, old)
    history.add(db, new)
    raw = bytearray(db.read_bytes())
    page = int.from_bytes(raw[16:18], "big") or 65536
    cut = len(raw) - 2 * page
    raw[cut:] = b"\xa5" * (len(raw) - cut)                    # the last pages (requests), the schema left alone
    db.write_bytes(bytes(raw))
    for argv in (["history", "list"], ["history", "noise"], ["compare", "20261201-00", "20261201-05"],
                 ["history", "add", str(new)]):
        res = run_cli(*argv, "--db", db)
        assert res.returncode != 0 and "Traceback" not in res.stderr, (argv, res.stderr)
        assert f"{db}: damaged (" in res.stderr and "restore it from a copy" in res.stderr, (argv, res.stderr)
    assert db.read_bytes() == bytes(raw)


def test_an_empty_history_file_is_refused_by_every_command_never_filled(two_runs, tmp_path):
    """#35: a 0-byte history was silently re-created by history add (sqlite takes an empty file as a new store)."""
    db, old, new = two_runs
    db.write_bytes(b"")
    for argv in (["history", "list"], ["history", "noise"], ["history", "add", str(new)]):
        res = run_cli(*argv, "--db", db)
        assert res.returncode == 2 and "Traceback" not in res.stderr, (argv, res.stderr)
        assert res.stderr.startswith(f"rackbench {argv[0]}") and f"{db}: an empty file, not a history" in res.stderr
    assert db.read_bytes() == b""


def test_a_point_whose_request_export_was_cut_short_is_refused_with_one_line(two_runs):
    """#35: after a full disk cut AIPerf's export at 6 of 19 requests, `history add` stored the point with 5 request
    rows, rc 0. Such a point is set aside, saying why, and nothing of it is written."""
    db, old, new = two_runs
    point = new / "points" / f"{CASE}.json"
    data = json.loads(point.read_text())
    data["requests"]["recorded"] = 6
    point.write_text(json.dumps(data))
    res = run_cli("history", "add", str(new), "--db", db)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"holds 6 of the {data['requests']['completed']:.0f} requests its summary counts" in res.stderr
    assert not db.exists() or sqlite3.connect(db).execute("SELECT COUNT(*) FROM points").fetchone() == (0,)


def test_compare_reports_each_metric_with_a_bootstrap_interval(two_runs):
    db, old, new = two_runs
    history.add(db, old)
    history.add(db, new)
    res = run_cli("compare", "20261201-00", "20261201-05", "--db", db)    # run ids by prefix
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1] == f"{CASE}: better  (within-run bootstrap)"   # 488 -> 571 tok/s/GPU; no repeats
    row = next(ln for ln in res.stdout.splitlines() if "output tok/s per GPU" in ln)
    low, high = (float(x) for x in row.split("[")[1].split("]")[0].replace("%", "").split(","))
    assert 0 < low < 17 < high                                          # +17% measured, interval around it


def test_a_run_against_itself_is_within_noise_everywhere(two_runs):
    db, old, new = two_runs
    history.add(db, new)
    with contextlib.closing(history.connect(db)) as con:
        run = rows.runs(con)[0]["run_id"]
        p = rows.point(con, run, CASE)
    changes = compare_point(p, p)
    assert [c.verdict for c in changes] == ["within noise"] * len(registry.compared())
    assert all(c.low <= 0 <= c.high for c in changes)


@pytest.mark.parametrize("opt_out", [False, True])
def test_a_session_records_its_points_unless_told_not_to(pytester, catalog, opt_out):
    """Reused points count as measured: the session adds them (and nothing else) to <results-dir>/history.sqlite."""
    from tests.conftest import by_id, copy_suite
    copy_suite(pytester.path)
    prior = pytester.path / "prior" / "points"
    prior.mkdir(parents=True)
    r = json.loads((DATA / "results-local/points/tiny-llama-cpu-vllm-c1.json").read_text())
    r["identity"]["recipe_fingerprint"] = by_id(catalog, "tiny-llama-cpu-vllm").fingerprint
    (prior / "tiny-llama-cpu-vllm-c1.json").write_text(json.dumps(r))
    kept = request_file.write(ResultsFolder.at(prior.parent).case("tiny-llama-cpu-vllm", "tiny-llama-cpu-vllm-c1")
                              .requests, aiperf_records.read(DATA / "h200-gpu-run/aiperf/vllm-c8").requests)
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "-m", "local and not slurm", "-k", "vllm-c1",
                             "--reuse-results", str(prior.parent), "--results-dir", "out", "-p", "no:cacheprovider",
                             *(["--no-history"] if opt_out else []))
    copied = ResultsFolder.at(pytester.path / "out").case("tiny-llama-cpu-vllm", "tiny-llama-cpu-vllm-c1").requests
    assert copied.read_text() == kept.read_text()                   # a reused point keeps its requests
    res.assert_outcomes(passed=1)
    db = pytester.path / "out/history.sqlite"
    if opt_out:
        assert not db.exists()
    else:
        res.stdout.fnmatch_lines(["history: *out/history.sqlite: 1 point(s) added; *out/runs/*/report/report.html"])
        assert [(x["run_id"], x["points"]) for x in runs(db)] == [(r["identity"]["run_id"], 1)]
        with contextlib.closing(history.connect(db, create=False)) as con:
            stored = rows.point(con, r["identity"]["run_id"], "tiny-llama-cpu-vllm-c1")["requests"]
        assert len(stored) == len(aiperf_records.read(DATA / "h200-gpu-run/aiperf/vllm-c8").profiled)


def test_the_gate_fails_a_point_worse_with_confidence_than_a_run_of_the_history(two_runs, catalog):
    """--compare-run: the old H200 point judged against the newer run is a regression with confidence; the newer
    one judged against the old is not."""
    from rackbench.results.verdict import judge
    from tests.conftest import by_id
    db, old, new = two_runs
    history.add(db, old)
    history.add(db, new)
    profile = by_id(catalog, PROFILE)
    with contextlib.closing(history.connect(db)) as con:
        p_old, p_new = (rows.point(con, *queries.resolve_runs(con, r), CASE) for r in ("20261201-00", "20261201-05"))
    r_old = files.read(old / "points" / f"{CASE}.json")
    worse = judge(r_old, profile, against=("20261201-055706-822", compare_point(p_new, p_old)[0]))
    msg = [c.message for c in worse.checks if c.name == "regression" and not c.ok]
    assert msg and msg[0].startswith("regression with confidence: output tok/s per GPU 488.1 against 571.0 in run "
                                     "20261201-055706-822, -14.5% [")
    r_new = files.read(new / "points" / f"{CASE}.json")
    fine = judge(r_new, profile, against=("20261201-002632-930", compare_point(p_old, p_new)[0]))
    assert [c.ok for c in fine.checks if c.name == "regression"] == [True]


def test_an_unknown_compare_run_stops_the_session(pytester, two_runs):
    """Before anything is allocated: a history that is not there (and is not created), or a run it does not hold."""
    from tests.conftest import copy_suite
    copy_suite(pytester.path)
    args = ("--import-mode=importlib", "benchmarks", "-m", "local", "--compare-run", "nope", "--results-dir", "out",
            "-p", "no:cacheprovider")
    res = pytester.runpytest(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--compare-run: *out/history.sqlite: no results history there*"])
    assert not (pytester.path / "out/history.sqlite").exists()
    history.add(pytester.path / "out/history.sqlite", two_runs[2])
    res = pytester.runpytest(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--compare-run: 'nope' names no run in the history*"])


def test_compare_groups_the_points_by_the_changelog_entries_that_select_them(two_runs, tmp_path):
    db, old, new = two_runs
    history.add(db, old)
    history.add(db, new)
    log = tmp_path / "perf-changelog.yaml"
    log.write_text("- config-keys:\n    - kimi-k3-gb200-*\n  description:\n    - GB200\n"
                   "  pr-link: https://github.com/o/r/pull/1\n\n"
                   "- config-keys:\n    - llama-770m-h200-*\n  description:\n    - H200 profiles\n"
                   "  pr-link: https://github.com/o/r/pull/2\n")
    res = run_cli("compare", "20261201-00", "20261201-05", "--db", db, "--changelog", log)
    assert res.stdout.splitlines()[-1] == "perf-changelog entry 2 (https://github.com/o/r/pull/2): 1 point(s): 1 better"
    assert "entry 1 " not in res.stdout


def test_the_commit_a_session_records(tmp_path, monkeypatch):
    """git's HEAD, marked -dirty when tracked files changed; $RACKBENCH_COMMIT wins (a tree with a stale .git)."""
    import subprocess
    monkeypatch.delenv("RACKBENCH_COMMIT", raising=False)
    assert history.git_commit(tmp_path) is None                              # not a checkout
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert history.git_commit(tmp_path) == head
    (tmp_path / "f").write_text("2")
    assert history.git_commit(tmp_path) == head + "-dirty"
    monkeypatch.setenv("RACKBENCH_COMMIT", "6c007bc")
    assert history.git_commit(tmp_path) == "6c007bc"


def test_an_interrupted_point_is_kept_in_its_folder_and_out_of_the_history(tmp_path):
    """A point cut short by Ctrl-C or SIGTERM is stored (run.interrupted, what it measured) but is no measurement:
    `history add` sets it aside with the reason and adds the rest; a folder of interrupted points alone adds
    nothing and says why."""
    src = DATA / "results-local/points"
    d = tmp_path / "run"
    (d / "points").mkdir(parents=True)
    for name in ("tiny-llama-cpu-vllm-c1.json", "tiny-llama-cpu-vllm-c4.json"):
        r = json.loads((src / name).read_text())
        if name.endswith("c4.json"):
            r["run"].update(interrupted=True, stopped_by="KeyboardInterrupt: signal 15")
        (d / "points" / name).write_text(json.dumps(r))
    added = history.add(tmp_path / "h.sqlite", d)
    assert added.points == 1 and "interrupted (KeyboardInterrupt: signal 15)" in \
        added.skipped["tiny-llama-cpu-vllm-c4.json"]
    (d / "points" / "tiny-llama-cpu-vllm-c1.json").unlink()
    res = run_cli("history", "add", d, "--db", tmp_path / "other.sqlite")
    assert res.returncode == 2 and "interrupted" in res.stderr and not (tmp_path / "other.sqlite").exists()


def test_read_commands_create_nothing(tmp_path):
    """compare and history list on a store that is not there say so and leave no empty store behind."""
    res = run_cli("history", "list", "--db", tmp_path / "new.sqlite")
    assert res.returncode == 2 and "no results history there" in res.stderr
    assert res.stderr.startswith("rackbench history list: ")          # the whole command, not its leaf (`list:`)
    res = run_cli("compare", "a", "b", "--db", tmp_path / "none.sqlite")
    assert res.returncode == 2 and "no results history there" in res.stderr
    assert res.stderr.startswith("rackbench compare: ")
    assert list(tmp_path.iterdir()) == []
