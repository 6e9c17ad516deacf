"""The suite's own measurements as data: one JSON record per line of ``measurements/suite.jsonl`` (asv-style: the
date, the commit, the machine, the figures, and what exactly ran), appended by ``scripts/record-measurement`` and
shown in docs/measurements.md by a table generated from them (``rackbench docs``). A figure is compared only with
records of its own kind and machine: these machines' speed moves 30-70% within minutes, so a change's effect is the
ratio ``scripts/bench-tests --against REF`` prints, measured in one run, not the difference of two records."""

from __future__ import annotations

import json
from pathlib import Path

from rackbench.core.errors import ConfigError, Problem

FILE = Path(__file__).resolve().parents[2] / "measurements" / "suite.jsonl"

# kind -> (what it measures, how)
KINDS: dict[str, tuple[str, str]] = {
    "ci": ("CI", "`.ci/run` on a clean clone of main on a fresh machine, installs included, as CI timed it"),
    "ci-local": ("CI here", "`CI=true bash .ci/run` from a fresh clone on a development machine (its installs, "
                 "Slurm and the images may be there already)"),
    "test-command": ("the test command", "`scripts/test` from a fresh clone, Slurm running, servers installed"),
    "main-job": ("the main job", "`scripts/bench` from a fresh clone, as a new user runs it"),
    "ranking": ("the local ranking", "`scripts/bench -m local -k rank`: the local ranking's two searches and its case, "
                "servers installed"),
    "offline-suite": ("offline suite", "`pytest -m offline -q -p no:cacheprovider`, serial"),
    "bench-tests": ("offline suite against its collection", "`scripts/bench-tests`: the suite's CPU time and its own "
                    "collection's, measured in one run"),
    "bench-tests-against": ("offline suite against a commit", "`scripts/bench-tests --against REF`: REF's suite and "
                            "this tree's in turn, the ratio of their fastest runs"),
    "cost-study": ("where the time goes", "one function or step timed against the code it replaced, in one run "
                   "(benchmarks/ and the per-test rusage plugin)"),
}
# kinds whose figure is a ratio measured in one run: seconds across their records compare nothing
RATIOS = ("bench-tests", "bench-tests-against", "cost-study")


def read(path: Path = FILE) -> list[dict]:
    """Every record, oldest first (none where the file is not: an installed package has no measurements/); a line
    that is not a record names the file and the line."""
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise ConfigError(Problem(str(path), f"line {n}", f"not JSON: {err}", "fix or remove the line")) from None
        if record.get("kind") not in KINDS or not record.get("date"):
            raise ConfigError(Problem(str(path), f"line {n}", f"kind {record.get('kind')!r} or date missing",
                                      f"use one of {', '.join(KINDS)} and a date"))
        out.append(record)
    return sorted(out, key=lambda r: r["date"])


def _figure(r: dict) -> str:
    return " / ".join(f for f in (r.get("wall"), r.get("cpu")) if f) or "—"


def _machine(r: dict) -> str:
    m = r.get("machine") or {}
    return f"{m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB" + (f", {m['gpu']}" if m.get("gpu") else "")


def table(records: list[dict] | None = None) -> str:
    """One row per kind of measurement: its method, its latest record and its best-known one (least wall time), on
    the machine of the latest."""
    records = read() if records is None else records
    rows = ["| measurement | method | records | latest (date, commit: figure) | best known (date, commit: figure) |",
            "|---|---|---:|---|---|"]
    for kind, (title, method) in KINDS.items():
        mine = [r for r in records if r["kind"] == kind]
        if not mine:
            continue
        latest = mine[-1]
        same = [r for r in mine if r.get("wall_s") is not None and _machine(r) == _machine(latest)]
        best = min(same, key=lambda r: r["wall_s"]) if same and kind not in RATIOS else None

        def cell(r: dict | None) -> str:
            return f"{r['date']}, {r.get('commit') or 'a landing'}: {_figure(r)}" if r else "— (a ratio: see latest)"
        rows.append(f"| {title} | {method} ({_machine(latest)}) | {len(mine)} | {cell(latest)} | {cell(best)} |")
    return "\n".join(rows)
