"""The results history's rows read back as typed values: the runs, a point's metrics, its requests and its stored
result. A history is input like any file (copied, edited, damaged by hand): every value is checked for the type the
store (rackbench.history.store) wrote, and anything else is one line (ValueError) naming the run, the case and the
value, never a TypeError or a RecursionError.
"""

from __future__ import annotations

import json
import sqlite3

from rackbench.core.files import MAX_JSON_DEPTH, json_depth
from rackbench.history.store import REQUEST_COLUMNS, columns, has_table, real
from rackbench.load.records import Request
from rackbench.results import metrics as registry
from rackbench.results.model import PointResult, parse, problems


def runs(con: sqlite3.Connection) -> list[dict]:
    rows = con.execute("SELECT r.run_id, r.git_commit, r.added_at, r.source, COUNT(p.case_id), SUM(p.passed) FROM "
                       "runs r LEFT JOIN points p USING (run_id) GROUP BY r.run_id ORDER BY MIN(p.started_at), "
                       "r.run_id")
    return [{"run_id": a, "git_commit": b, "added_at": c, "source": src, "points": n, "passed": ok or 0}
            for a, b, c, src, n, ok in rows]


def _number(value, where: str) -> float | None:
    """A stored number as the store wrote it (REAL, INTEGER or NULL); ValueError (one line) for anything else: a
    history is input like any file, and one edited or damaged by hand must not end in a TypeError."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise ValueError(f"{where}: {value!r} is not a number: the history was edited or damaged (restore it from a "
                     "copy, or rebuild it with `rackbench history add` from the results folders)")


def _stored_result(blob, where: str) -> PointResult:
    """A point's stored result JSON, read as untrusted input (bounded depth, checked against the model)."""
    try:
        data = json.loads(blob) if isinstance(blob, (str, bytes)) else None
        deep = json_depth(data) > MAX_JSON_DEPTH
    except RecursionError:
        deep = True
    except ValueError as err:
        raise ValueError(f"{where}: its stored result is not JSON ({err})") from None
    found = ["nested too deep"] if deep else problems(data)
    if found:
        raise ValueError(f"{where}: its stored result is not a rackbench result ({'; '.join(found[:2])}): the "
                         "history was edited or damaged")
    return parse(data)


def metric_values(con: sqlite3.Connection, run_id: str, case_id: str, result_json: str | None = None
                  ) -> dict[str, float | None]:
    """Every registered metric of a point: as stored, and computed from its stored result where not stored."""
    have = {name: _number(value, f"history metric {name} of {run_id}/{case_id}") for name, value in con.execute(
        "SELECT name, value FROM metrics WHERE run_id = ? AND case_id = ?", (run_id, case_id))} \
        if has_table(con, "metrics") else {}
    missing = [name for name in registry.METRICS if name not in have]
    if missing:
        if result_json is None:
            result_json = con.execute("SELECT result_json FROM points WHERE run_id = ? AND case_id = ?",
                                      (run_id, case_id)).fetchone()[0]
        r = _stored_result(result_json, f"history point {run_id}/{case_id}")
        have.update({name: real(registry.METRICS[name].get(r)) for name in missing})
    return {name: have.get(name) for name in registry.METRICS}


def point(con: sqlite3.Connection, run_id: str, case_id: str) -> dict | None:
    """One point: its identity columns, every metric by name, and its per-request rows."""
    row = con.execute("SELECT fingerprint, cluster, profile, gpus, duration_s, result_json FROM points WHERE "
                      "run_id = ? AND case_id = ?", (run_id, case_id)).fetchone()
    if row is None:
        return None
    out = dict(zip(("fingerprint", "cluster", "profile"), row[:3]))
    out.update(gpus=_number(row[3], f"history point {run_id}/{case_id} gpus"),
               duration_s=_number(row[4], f"history point {run_id}/{case_id} duration_s"))
    out.update(metric_values(con, run_id, case_id, row[5]))
    out["run_id"], out["case_id"] = run_id, case_id
    have = [c for c in REQUEST_COLUMNS if c in columns(con, "requests")]      # a store opened read-only may be older
    odd = " OR ".join(f"typeof({c}) NOT IN ('real', 'integer', 'null')" for c in have)
    if con.execute(f"SELECT COUNT(*) FROM requests WHERE run_id = ? AND case_id = ? AND ({odd})",
                   (run_id, case_id)).fetchone()[0]:
        raise ValueError(f"history requests of {run_id}/{case_id}: a value that is not a number: the history was "
                         "edited or damaged (restore it from a copy, or rebuild it with `rackbench history add`)")
    rows = con.execute(f"SELECT {', '.join(have)} FROM requests WHERE run_id = ? AND case_id = ?", (run_id, case_id))
    out["requests"] = [_request(dict(zip(have, values))) for values in rows]
    return out


def _request(row: dict) -> Request:
    return Request("profiling", ok=bool(row.pop("ok")), **row)


def cases(con: sqlite3.Connection, run_id: str) -> list[str]:
    return [c for (c,) in con.execute("SELECT case_id FROM points WHERE run_id = ? ORDER BY case_id", (run_id,))]


def results(con: sqlite3.Connection, run_id: str) -> list[tuple[str, PointResult]]:
    """(profile, result) of every point of a run, in case order."""
    rows = con.execute("SELECT profile, result_json FROM points WHERE run_id = ? ORDER BY case_id", (run_id,))
    return [(profile, _stored_result(blob, f"history run {run_id}")) for profile, blob in rows]
