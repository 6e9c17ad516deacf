"""The results history: every point servebench measured, in one SQLite file (``results/history.sqlite``).

SQLite, not DuckDB: it is in Python's standard library (nothing to install on a login node), one file that a CI
artifact or a static site can carry, transactional (a failed add leaves the store as it was), and the store is
small (a row per point, a row per profiled request for the confidence intervals).

A run is keyed by its run id; a point by (run id, case id), with the git commit, recipe fingerprint, cluster,
profile, concurrency, versions, image and the stored verdict. Adding a run twice changes nothing. Each point keeps
its per-request records (output tokens, latency, TTFT, success) for bootstrapped comparisons (servebench.compare).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .compare import Change, compare_groups
from .noise import POOLED, Noise, Repeat, pooled, repeats as _repeats
from .report import load_points, points_folder
from .result import PointResult
from .results import read_records

log = logging.getLogger(__name__)

DEFAULT_DB = "results/history.sqlite"     # a session writes <results-dir>/history.sqlite
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, git_commit TEXT, added_at TEXT NOT NULL, source TEXT);
CREATE TABLE IF NOT EXISTS points (
  run_id TEXT NOT NULL REFERENCES runs(run_id), case_id TEXT NOT NULL, profile TEXT NOT NULL, cluster TEXT NOT NULL,
  concurrency INTEGER NOT NULL, fingerprint TEXT NOT NULL, gpus INTEGER, duration_s REAL, passed INTEGER,
  output_tps_per_gpu REAL, tps_per_user_p50 REAL, ttft_p50_ms REAL, ttft_p99_ms REAL, error_rate REAL,
  started_at TEXT, result_json TEXT NOT NULL, PRIMARY KEY (run_id, case_id));
CREATE TABLE IF NOT EXISTS requests (
  run_id TEXT NOT NULL, case_id TEXT NOT NULL, output_tokens REAL, latency_ms REAL, ttft_ms REAL, ok INTEGER,
  end_s REAL,
  FOREIGN KEY (run_id, case_id) REFERENCES points(run_id, case_id));
CREATE INDEX IF NOT EXISTS points_by_case ON points(case_id, fingerprint);
CREATE INDEX IF NOT EXISTS requests_by_point ON requests(run_id, case_id);
"""


@dataclass(frozen=True)
class Added:
    run_ids: list[str]
    points: int
    already: int              # points the store held already (adding is idempotent)
    skipped: dict[str, str]   # result files not added, and why


def connect(db: Path | str) -> sqlite3.Connection:
    """Open (creating) the store; ValueError (one line) when the file is not a servebench history."""
    db = Path(db)
    if db.exists() and db.is_dir():
        raise ValueError(f"{db}: a folder, not a history file")
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db)
    try:
        con.executescript(SCHEMA)
        con.execute("SELECT run_id, git_commit FROM runs LIMIT 1")
    except sqlite3.DatabaseError as err:
        con.close()
        raise ValueError(f"{db}: not a servebench history ({err})") from None
    return con


def git_commit(where: Path) -> str | None:
    """The commit a session measured: $SERVEBENCH_COMMIT when set (a checkout without, or with a stale, .git:
    a container, a copied tree), else git's HEAD, with "-dirty" when tracked files differ from it."""
    if os.environ.get("SERVEBENCH_COMMIT"):
        return os.environ["SERVEBENCH_COMMIT"]

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
    head = git("rev-parse", "HEAD")
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return None
    dirty = git("diff", "--quiet", "HEAD", "--")
    return head.stdout.strip() + ("-dirty" if dirty is not None and dirty.returncode == 1 else "")


def records_dir(results_dir: Path, r: PointResult) -> Path | None:
    """Where a point's AIPerf records are: beside the results folder as a session writes it, else where it ran."""
    for cand in (results_dir / r.identity.profile / r.identity.case_id / "aiperf", Path(r.run.artifact_dir)):
        if (cand / "profile_export.jsonl").is_file():
            return cand
    return None


def request_rows(artifact_dir: Path | None) -> list[tuple]:
    """(output tokens, latency ms, TTFT ms, ok, end s) of each profiled request."""
    if artifact_dir is None:
        return []
    rows = []
    for rec in read_records(artifact_dir):
        if rec.get("metadata", {}).get("benchmark_phase") != "profiling":
            continue
        m = rec.get("metrics", {})
        val = lambda k: (m.get(k) or {}).get("value")  # noqa: E731
        end = rec["metadata"].get("request_end_ns")
        rows.append((val("output_sequence_length") or 0.0, val("request_latency"), val("time_to_first_token"),
                     0 if "error" in rec else 1, end / 1e9 if end else None))
    return rows


def add(db: Path | str, results_dir: Path | str, commit: str | None = None) -> Added:
    """Record every valid point of a results folder (one transaction: all or nothing). ValueError (one line) when
    the folder is not a results folder or holds no valid point."""
    results_dir = Path(results_dir)
    points_folder(results_dir)
    points, skipped = load_points(results_dir)
    if not points:
        raise ValueError(f"{results_dir}: no valid result in points/; nothing added")
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    added = already = 0
    with closing(connect(db)) as con, con:
        for r in points:
            idn = r.identity
            con.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?)", (idn.run_id, commit, now, str(results_dir.resolve())))
            if con.execute("SELECT 1 FROM points WHERE run_id = ? AND case_id = ?",
                           (idn.run_id, idn.case_id)).fetchone():
                already += 1
                continue
            ttft = r.latency_ms.ttft
            con.execute("INSERT INTO points VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                idn.run_id, idn.case_id, idn.profile, idn.cluster, idn.concurrency, idn.recipe_fingerprint,
                r.throughput.gpus, r.throughput.duration_s, None if r.verdict is None else int(r.verdict.passed),
                r.throughput.output_tps_per_gpu, r.interactivity.output_tps_per_user.p50, ttft.p50, ttft.p99,
                r.requests.error_rate, idn.started_at, json.dumps(r.dump())))
            con.executemany("INSERT INTO requests VALUES (?,?,?,?,?,?,?)",
                            [(idn.run_id, idn.case_id, *row) for row in request_rows(records_dir(results_dir, r))])
            added += 1
    log.info("history %s: %d point(s) added, %d already there", db, added, already)
    return Added(sorted({r.identity.run_id for r in points}), added, already, skipped)


def runs(db: Path | str) -> list[dict]:
    with closing(connect(db)) as con:
        rows = con.execute("SELECT r.run_id, r.git_commit, r.added_at, r.source, COUNT(p.case_id), SUM(p.passed) FROM "
                           "runs r LEFT JOIN points p USING (run_id) GROUP BY r.run_id ORDER BY MIN(p.started_at), "
                           "r.run_id")
        return [{"run_id": a, "git_commit": b, "added_at": c, "source": src, "points": n, "passed": ok or 0}
                for a, b, c, src, n, ok in rows]


def point(con: sqlite3.Connection, run_id: str, case_id: str) -> dict | None:
    keys = ("fingerprint", "cluster", "profile", "gpus", "duration_s", "output_tps_per_gpu", "tps_per_user_p50",
            "ttft_p50_ms", "ttft_p99_ms", "error_rate")
    row = con.execute(f"SELECT {', '.join(keys)} FROM points WHERE run_id = ? AND case_id = ?",
                      (run_id, case_id)).fetchone()
    if row is None:
        return None
    out = dict(zip(keys, row))
    out["requests"] = con.execute("SELECT output_tokens, latency_ms, ttft_ms, ok, end_s FROM requests WHERE run_id = ? AND "
                                  "case_id = ?", (run_id, case_id)).fetchall()
    return out


def cases(con: sqlite3.Connection, run_id: str) -> list[str]:
    return [c for (c,) in con.execute("SELECT case_id FROM points WHERE run_id = ? ORDER BY case_id", (run_id,))]


def resolve_runs(con: sqlite3.Connection, key: str, exclude: tuple[str, ...] = (), profile: str | None = None
                 ) -> list[str]:
    """The runs ``key`` names, oldest first: ``last:N`` (the N newest runs, leaving out ``exclude``; with
    ``profile``, the N newest that measured it), a git commit or its prefix (every run of that commit: its
    repeats), or a run id or a unique prefix of one. ValueError (one line) when it names none."""
    order = "ORDER BY MIN(p.started_at), r.run_id"
    where, args = ("WHERE p.profile = ?", (profile,)) if profile else ("", ())
    if key.startswith("last:"):
        try:
            n = int(key[5:])
            assert n >= 1
        except (ValueError, AssertionError):
            raise ValueError(f"{key!r}: write last:N with N a whole number >= 1, e.g. last:3") from None
        rows = [r for (r,) in con.execute(f"SELECT r.run_id FROM runs r JOIN points p USING (run_id) {where} "
                                          f"GROUP BY r.run_id {order}", args) if r not in exclude]
        found = rows[-n:]
    else:
        by_id = sorted({r for (r,) in con.execute("SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ?",
                                                  (key, f"{key}%"))})
        if len(by_id) > 1 and key not in by_id:
            raise ValueError(f"{key!r} is the prefix of several run ids: {', '.join(by_id[:5])}; name one")
        found = [key] if key in by_id else by_id
        if not found and re.fullmatch(r"[0-9a-f]{4,40}", key):
            found = [r for (r,) in con.execute(f"SELECT r.run_id FROM runs r JOIN points p USING (run_id) WHERE "
                                               f"r.git_commit LIKE ? GROUP BY r.run_id {order}", (f"{key}%",))]
    if not found:
        raise ValueError(f"{key!r} names no run in the history; see `servebench history list`")
    return found


def repeats(con: sqlite3.Connection, cluster: str, metric: str = "output_tps_per_gpu") -> list[Repeat]:
    """The cluster's repeated points: one case measured by several runs with one recipe fingerprint."""
    if metric not in POOLED + ("error_rate",):
        raise ValueError(f"{metric!r} is not a stored metric")
    rows = con.execute(f"SELECT case_id, fingerprint, run_id, {metric} FROM points WHERE cluster = ? "
                       "ORDER BY case_id, started_at, run_id", (cluster,))
    return _repeats(rows)


def noise(con: sqlite3.Connection, cluster: str) -> dict[str, Noise | None]:
    """The run-to-run noise of each pooled metric on ``cluster`` (None where the history holds no repeats)."""
    return {m: pooled(repeats(con, cluster, m)) for m in POOLED}


def case_profiles(con: sqlite3.Connection) -> dict[str, str]:
    """case id -> profile id, for every case the history holds."""
    return dict(con.execute("SELECT DISTINCT case_id, profile FROM points"))


def by_case(con: sqlite3.Connection, runs: list[str], profile: str | None = None) -> dict[str, list[dict]]:
    """Each case's points (servebench.history.point) in ``runs``, of ``profile`` if given: one per run measuring it."""
    got: dict[str, list[dict]] = {}
    for run in runs:
        for case in cases(con, run):
            p = point(con, run, case)
            if profile is None or p["profile"] == profile:
                got.setdefault(case, []).append(p)
    return got


def compare_cases(con: sqlite3.Connection, a: dict[str, list[dict]], b: dict[str, list[dict]],
                  metrics: tuple[str, ...] | None = None, noises: dict[str, dict] | None = None
                  ) -> dict[str, list[Change]]:
    """Per case in both ``a`` and ``b`` (by_case): the changes from A to B, with the run-to-run noise of the case's
    cluster where the history has repeats there (servebench.compare). ``noises`` caches it per cluster."""
    noises = {} if noises is None else noises
    out = {}
    for case in sorted(set(a) & set(b)):
        cluster = b[case][0]["cluster"]
        if cluster not in noises:
            noises[cluster] = noise(con, cluster)
        out[case] = compare_groups(a[case], b[case], metrics=metrics, noise=noises[cluster])
    return out


def compare_runs(con: sqlite3.Connection, runs_a: list[str], runs_b: list[str], profile: str | None = None,
                 metrics: tuple[str, ...] | None = None) -> dict[str, list[Change]]:
    """compare_cases over the points of two groups of runs."""
    return compare_cases(con, by_case(con, runs_a, profile), by_case(con, runs_b, profile), metrics)
