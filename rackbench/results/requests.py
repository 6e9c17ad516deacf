"""A point's requests in rackbench's own form: ``<case>/requests.csv`` (the path: rackbench.core.results_folder),
one row per request the load generator sent, warm-up included, with named columns.

It is written once, when the point is stored, from what the generator's reader translated
(rackbench.load.records); the results history, the ``--compare-run`` gate and report.html's links read it, so
none of them needs the load generator that measured the point (a site's generator need not be installed where
its results are added or compared). CSV because every tool reads it (a spreadsheet, pandas, DuckDB, ``sqlite3
.import``); an empty cell is a value the generator did not report. Columns a reader does not know are ignored, so
a later rackbench may add some.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import math
from pathlib import Path
from typing import Iterable

from rackbench.core.files import write_atomic
from rackbench.load.records import Request

# (column, how a cell reads back); the order is the file's.
COLUMNS: tuple[tuple[str, type], ...] = (
    ("phase", str), ("ok", bool), ("start_s", float), ("end_s", float), ("credit_s", float), ("ttft_ms", float),
    ("latency_ms", float), ("output_tokens", float), ("input_tokens", float), ("session", str), ("turn", int),
    ("error_code", int), ("error_type", str), ("error_message", str))
REQUIRED = ("phase", "ok", "end_s", "ttft_ms", "latency_ms", "output_tokens")
NEVER_EMPTY = ("phase", "ok")
ERROR = {"error_code": "code", "error_type": "type", "error_message": "message"}
FIELDS = tuple(f.name for f in dataclasses.fields(Request))     # Request's own order, for its positional arguments


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    return repr(value) if isinstance(value, float) else str(value)


def text(requests: Iterable[Request]) -> str:
    """The file's text: a header of COLUMNS, then a row per request."""
    out = io.StringIO()
    rows = csv.writer(out, lineterminator="\r\n")     # RFC 4180; a cell holding either character is quoted
    rows.writerow([name for name, _ in COLUMNS])
    for q in requests:
        error = q.error or {}
        fields = {**{k: getattr(q, k) for k, _ in COLUMNS if k not in ERROR},
                  **{k: error.get(v) for k, v in ERROR.items()}}
        if not isinstance(fields["error_code"], int) or isinstance(fields["error_code"], bool):
            fields["error_code"] = None
        rows.writerow([_cell(fields[name]) for name, _ in COLUMNS])
    return out.getvalue()


def write(path: Path | str, requests: Iterable[Request]) -> Path:
    """Write a point's requests atomically (rackbench.core.files.write_atomic)."""
    return write_atomic(path, text(requests))


def _parse(kind: type, cell: str, needed: bool = False):
    if cell == "":
        if needed:
            raise ValueError("empty (every request has one)")
        return None
    if kind is bool:
        if cell not in ("0", "1"):
            raise ValueError(f"{cell!r} is not 0 or 1")
        return cell == "1"
    value = kind(cell)
    if kind is float and not math.isfinite(value):
        raise ValueError(f"{cell!r} is not a finite number")
    return value


def read(path: Path | str) -> list[Request]:
    """Every request of the file (gzip-compressed where its name ends in .gz), in its order. ValueError naming the
    file, the line and the column of anything it cannot read (the file is rackbench's own: it is never half-written,
    so a bad cell means it was edited)."""
    path = Path(path)
    try:
        data = path.read_bytes()
        text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read it ({getattr(err, 'strerror', None) or err})") from None
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    missing = [c for c in REQUIRED if c not in (header or [])]
    if missing:
        raise ValueError(f"{path}: line 1: not a rackbench requests file (no column {', '.join(missing)}; "
                         f"it starts with the columns {', '.join(n for n, _ in COLUMNS)})")
    kinds = dict(COLUMNS)
    plan = [(i, name, kinds[name], name in NEVER_EMPTY) for i, name in enumerate(header) if name in kinds]
    body = list(rows)
    columns = _columns(plan, body, len(header))
    if columns is None:               # a cell the column-wise read is not sure of: the careful read names it
        columns = _careful(path, plan, body, len(header))
    got = {name: values for (_, name, _, _), values in zip(plan, columns)}
    none = [None] * len(body)
    errors = [dict(zip(ERROR.values(), cells)) if cells.count(None) < len(ERROR) else None
              for cells in zip(*(got.get(k, none) for k in ERROR))]
    return [Request(*fields) for fields in zip(*(errors if name == "error" else got.get(name, none)
                                                  for name in FIELDS))]


def _columns(plan: list, body: list[list[str]], width: int) -> list[list] | None:
    """Each planned column's values, a column at a time; None where a row or a cell is not plainly valid (a row of
    another width, an empty needed cell, a cell that does not parse or is not finite): ``_careful`` then reads the
    file cell by cell and says where."""
    if any(len(row) != width for row in body):
        return None
    cells = list(zip(*body)) if body else [()] * width
    out = []
    for i, _, kind, needed in plan:
        col = cells[i]
        if needed and "" in col:
            return None
        try:
            if kind is float:
                values = [float(c) if c else None for c in col]
                if not math.isfinite(sum(filter(None, values))):   # nan or inf (or a sum past the float range)
                    return None
            elif kind is bool:
                if not set(col) <= {"0", "1", ""}:
                    return None
                values = [c == "1" if c else None for c in col]
            else:
                values = [kind(c) if c else None for c in col]
        except ValueError:
            return None
        out.append(values)
    return out


def _careful(path: Path, plan: list, body: list[list[str]], width: int) -> list[list]:
    """``_columns`` cell by cell: ValueError naming the file, the line and the column of the first bad cell."""
    out: list[list] = [[] for _ in plan]
    for line, row in enumerate(body, start=2):
        if len(row) != width:
            raise ValueError(f"{path}: line {line}: {len(row)} cells, the header has {width}")
        for values, (i, name, kind, needed) in zip(out, plan):
            try:
                values.append(_parse(kind, row[i], needed))
            except ValueError as err:
                raise ValueError(f"{path}: line {line}: column {name}: {err}") from None
    return out
