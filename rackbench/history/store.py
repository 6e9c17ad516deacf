"""The results history: every point rackbench measured, in one SQLite file (``<results>/history.sqlite``).

SQLite, not DuckDB: it is in Python's standard library (nothing to install on a login node), one file that a CI
artifact or a static site can carry, transactional (a failed add leaves the store as it was; two sessions adding
at once both land, one after the other), and the store is small (a row per point and metric, a row per profiled
request for the confidence intervals).

A run is keyed by its run id; a point by (run id, case id), with the git commit, recipe fingerprint, cluster,
profile, concurrency, its whole result and the stored verdict. Metrics are stored by name (rackbench.results.
metrics), and a metric the store does not hold yet is computed from the stored result when read, so a new metric
compares across old runs too. Each point keeps its profiled requests (REQUEST_COLUMNS of rackbench.results.
requests, read from the point's own requests file) for bootstrapped comparisons; a results folder written before
that file existed gives them through its load generator's reader, where that generator is installed.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rackbench.core.results_folder import ResultsFolder
from rackbench.load.generator import generator_for
from rackbench.load.records import Request
from rackbench.results import metrics as registry
from rackbench.results import requests as request_file
from rackbench.results.files import load_points
from rackbench.results.model import PointResult

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 120        # another session adding at the same moment: wait for its transaction
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, git_commit TEXT, added_at TEXT NOT NULL, source TEXT);
CREATE TABLE IF NOT EXISTS points (
  run_id TEXT NOT NULL REFERENCES runs(run_id), case_id TEXT NOT NULL, profile TEXT NOT NULL, cluster TEXT NOT NULL,
  concurrency INTEGER NOT NULL, fingerprint TEXT NOT NULL, gpus INTEGER, duration_s REAL, passed INTEGER,
  started_at TEXT, result_json TEXT NOT NULL, PRIMARY KEY (run_id, case_id));
CREATE TABLE IF NOT EXISTS metrics (
  run_id TEXT NOT NULL, case_id TEXT NOT NULL, name TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, case_id, name),
  FOREIGN KEY (run_id, case_id) REFERENCES points(run_id, case_id));
CREATE TABLE IF NOT EXISTS requests (
  run_id TEXT NOT NULL, case_id TEXT NOT NULL, output_tokens REAL, latency_ms REAL, ttft_ms REAL, ok INTEGER,
  end_s REAL, input_tokens REAL, start_s REAL,
  FOREIGN KEY (run_id, case_id) REFERENCES points(run_id, case_id));
CREATE INDEX IF NOT EXISTS points_by_case ON points(case_id, fingerprint);
CREATE INDEX IF NOT EXISTS requests_by_point ON requests(run_id, case_id);
"""
# What the store keeps of each profiled request (rackbench.load.records.Request's fields); a store written before
# the last two existed gets them added, empty, when it is opened to write.
REQUEST_COLUMNS = ("output_tokens", "latency_ms", "ttft_ms", "ok", "end_s", "input_tokens", "start_s")
# What every store rackbench made has (a store written before requests' last columns existed still reads).
NEEDED = {"runs": ("run_id", "git_commit", "added_at", "source"),
          "points": ("run_id", "case_id", "profile", "cluster", "concurrency", "fingerprint", "gpus", "duration_s",
                     "passed", "started_at", "result_json"),
          "requests": ("run_id", "case_id", "output_tokens", "latency_ms", "ttft_ms", "ok")}
POINT_COLUMNS = ("run_id", "case_id", "profile", "cluster", "concurrency", "fingerprint", "gpus", "duration_s",
                 "passed", "started_at", "result_json")


@dataclass(frozen=True)
class Added:
    run_ids: list[str]
    points: int
    already: int              # points the store held already (adding is idempotent)
    skipped: dict[str, str]   # result files not added, and why
    no_requests: dict[str, str] = field(default_factory=dict)  # added without requests (no bootstrap), and why


def connect(db: Path | str, create: bool = True) -> sqlite3.Connection:
    """Open the store (``create``: make it if it is not there; else a read-only open of an existing one). ValueError
    (one line) when there is none to read, or the file is not a rackbench history."""
    db = Path(db)
    if db.exists() and db.is_dir():
        raise ValueError(f"{db}: a folder, not a history file")
    if db.is_file() and db.stat().st_size == 0:         # sqlite would take it as a new store and fill it silently
        raise ValueError(f"{db}: an empty file, not a history (one rackbench made is never empty: a copy or a disk "
                         "that failed?); nothing was read or written: restore it from a copy, or remove it (a "
                         "session then starts a new history)")
    if not create and not db.is_file():
        raise ValueError(f"{db}: no results history there (a benchmark session writes <results>/history.sqlite; "
                         "`rackbench history add RESULTS` makes one)")
    try:
        if create:
            db.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(db, timeout=BUSY_TIMEOUT_S)
        else:
            con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except (OSError, sqlite3.Error) as err:
        raise ValueError(f"{db}: cannot open it ({err})") from None
    try:
        damage = con.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as err:
        damage = str(err) if "malformed" in str(err) else "ok"       # not a database at all: said below
    if damage != "ok":              # pages overwritten under an intact header: queries would fail one by one later
        con.close()
        raise ValueError(f"{db}: damaged ({damage.splitlines()[0]}); nothing was read or written: restore it from "
                         "a copy, or move it aside (a session then starts a new history)")
    try:
        if create:
            con.executescript(SCHEMA)
            for column in [c for c in REQUEST_COLUMNS if c not in columns(con, "requests")]:
                con.execute(f"ALTER TABLE requests ADD COLUMN {column} REAL")
        missing = [f"{table}.{column}" for table, needed in NEEDED.items()
                   for column in sorted(set(needed) - columns(con, table))]
    except sqlite3.DatabaseError as err:
        con.close()
        raise ValueError(f"{db}: not a rackbench history ({err})") from None
    if missing:
        con.close()
        raise ValueError(f"{db}: not a rackbench history (no {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''}): a file another program wrote, or one edited by hand")
    return con


def columns(con: sqlite3.Connection, table: str) -> set[str]:
    """The columns ``table`` has in this store (an older store, opened read-only, may lack newer ones)."""
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def has_table(con: sqlite3.Connection, name: str) -> bool:
    """Whether this store has table ``name`` (an older one may not)."""
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def git_commit(where: Path) -> str | None:
    """The commit a session measured: $RACKBENCH_COMMIT when set (a checkout without, or with a stale, .git:
    a container, a copied tree), else git's HEAD, with "-dirty" when tracked files differ from it."""
    if os.environ.get("RACKBENCH_COMMIT"):
        return os.environ["RACKBENCH_COMMIT"]

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


def requests_of(results_dir: Path, r: PointResult) -> tuple[list[Request], str | None]:
    """The point's profiled requests, from its requests file (rackbench.results.requests); for a results folder
    written before that file existed, from its load generator's own files where that generator is installed. With
    none: [] and why. ValueError (one line) for a requests file that cannot be read."""
    case = ResultsFolder.at(results_dir).case(r.identity.profile, r.identity.case_id)
    for kept in (case.requests, case.requests_archived):
        if kept.is_file():
            return [q for q in request_file.read(kept) if q.profiled], None
    try:
        generator = generator_for(r.run.generator)
    except LookupError:
        return [], f"no {case.requests.name}, and its load generator {r.run.generator!r} is not installed here"
    for out_dir in (case.load_dir(r.run.generator), Path(r.run.artifact_dir)):
        if out_dir.is_dir():
            got = generator.records(out_dir).profiled
            if got:
                return got, None
    return [], f"no {case.requests.name} and no records of {r.run.generator} beside it"


def add(db: Path | str, results_dir: Path | str, commit: str | None = None) -> Added:
    """Record every valid point of a results folder (one transaction: all or nothing). ValueError (one line) when
    the folder is not a results folder or holds no valid point."""
    results_dir = Path(results_dir)
    points, skipped = load_points(results_dir)
    for r in [r for r in points if r.run.interrupted]:      # kept in the results folder, never compared
        skipped[f"{r.identity.case_id}.json"] = f"interrupted ({r.run.stopped_by}): not a measurement; kept in " \
                                                 "the results folder only"
    for r in [r for r in points if r.requests.cut_short]:
        skipped[f"{r.identity.case_id}.json"] = (
            f"its per-request export holds {r.requests.recorded} of the {r.requests.completed:.0f} requests its "
            "summary counts (cut short: a full disk?): not a measurement; kept in the results folder only")
    points = [r for r in points if not r.run.interrupted and not r.requests.cut_short]
    if not points:
        raise ValueError(f"{results_dir}: no valid result in points/; nothing added" +
                         (f" ({len(skipped)} set aside: {'; '.join(f'{k}: {v}' for k, v in sorted(skipped.items()))})"
                          if skipped else ""))
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    added = already = 0
    no_requests: dict[str, str] = {}
    with closing(connect(db)) as con, con:
        con.execute("BEGIN IMMEDIATE")          # one writer at a time; a second session waits, then adds
        for r in points:
            idn = r.identity
            con.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?)",
                        (idn.run_id, commit, now, str(results_dir.resolve())))
            if con.execute("SELECT 1 FROM points WHERE run_id = ? AND case_id = ?",
                           (idn.run_id, idn.case_id)).fetchone():
                already += 1
                continue
            row = {"run_id": idn.run_id, "case_id": idn.case_id, "profile": idn.profile, "cluster": idn.cluster,
                   "concurrency": idn.concurrency, "fingerprint": idn.recipe_fingerprint, "gpus": r.throughput.gpus,
                   "duration_s": r.throughput.duration_s, "started_at": idn.started_at,
                   "passed": None if r.verdict is None else int(r.verdict.passed), "result_json": json.dumps(r.dump())}
            con.execute(f"INSERT INTO points ({', '.join(POINT_COLUMNS)}) VALUES "
                        f"({', '.join(':' + c for c in POINT_COLUMNS)})", row)
            con.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)",
                            [(idn.run_id, idn.case_id, name, real(value))
                             for name, value in registry.values(r).items()])
            requests, why = requests_of(results_dir, r)
            if why:
                no_requests[idn.case_id] = why
            con.executemany(f"INSERT INTO requests (run_id, case_id, {', '.join(REQUEST_COLUMNS)}) VALUES "
                            f"({', '.join('?' * (2 + len(REQUEST_COLUMNS)))})",
                            [(idn.run_id, idn.case_id, *_row(q)) for q in requests])
            added += 1
    log.info("history %s: %d point(s) added, %d already there", db, added, already)
    return Added(sorted({r.identity.run_id for r in points}), added, already, skipped, no_requests)


def _row(q: Request) -> tuple:
    return tuple(int(q.ok) if name == "ok" else getattr(q, name) for name in REQUEST_COLUMNS)


def real(value) -> float | None:
    """A stored number as a float; anything else (text, a bool, None) as None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
