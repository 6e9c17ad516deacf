"""AIPerf's exports read into rackbench's neutral records (rackbench.load.records): the one place that knows
AIPerf's file format.

* ``profile_export_aiperf.json``: AIPerf's summary of the profiling phase (absent when every request failed);
* ``profile_export.jsonl``: one record per request, warmup included, each failure with its error;
* ``phase_manifest.json``: each phase's start and end (the profiling phase's end is its grace's end);
* ``logs/aiperf.log``: the one place AIPerf says how many profiling requests it cancelled at its grace's end
  (``Phase profiling (profiling) complete | completed=N, cancelled=M, ...``); they have no per-request record.

A torn or unreadable file is a problem line in the records, never an exception: a killed run still yields what
it wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rackbench.load.records import LoadRecords, Request

SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"
PHASES = "phase_manifest.json"
LOG = "logs/aiperf.log"
PHASE_DONE = re.compile(r"Phase profiling \(profiling\) complete \| completed=([\d,]+), cancelled=([\d,]+)")
# rackbench's summary names -> AIPerf's metric names
NAMES = {
    "duration_s": "benchmark_duration", "successful": "request_count", "errors": "error_request_count",
    "completed": "completed_request_count", "requests_per_s": "request_throughput",
    "input_tps": "input_token_throughput", "output_tps": "output_token_throughput",
    "total_tps": "total_token_throughput", "tps_per_user": "output_token_throughput_per_user",
    "ttft_ms": "time_to_first_token", "itl_ms": "inter_token_latency", "e2e_ms": "request_latency",
    "effective_concurrency": "effective_concurrency", "issue_latency_ms": "credit_to_start_latency",
}


def _seconds(ns) -> float | None:
    return ns / 1e9 if isinstance(ns, (int, float)) else None


def _value(metrics: dict, name: str) -> float | None:
    value = (metrics.get(name) or {}).get("value") if isinstance(metrics.get(name), dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def request(rec: dict) -> Request:
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    error = rec.get("error") if isinstance(rec.get("error"), dict) else None
    return Request(
        phase=str(meta.get("benchmark_phase") or "profiling"), ok="error" not in rec, error=error,
        start_s=_seconds(meta.get("request_start_ns")), end_s=_seconds(meta.get("request_end_ns")),
        credit_s=_seconds(meta.get("credit_issued_ns")), ttft_ms=_value(metrics, "time_to_first_token"),
        latency_ms=_value(metrics, "request_latency"), output_tokens=_value(metrics, "output_sequence_length"),
        input_tokens=_value(metrics, "input_sequence_length"),
        session=str(meta.get("x_correlation_id") or meta.get("conversation_id") or "") or None,
        turn=meta.get("turn_index") if isinstance(meta.get("turn_index"), int) else None)


def read_requests(artifact_dir: Path) -> tuple[list[Request], list[str]]:
    """Every record AIPerf wrote so far (a torn last line of a killed run is skipped, and said)."""
    path = Path(artifact_dir) / RECORDS
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return [], []
    except OSError as err:
        return [], [f"{path}: cannot read it ({err.strerror or err})"]
    out, torn = [], 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            torn += 1
            continue
        if isinstance(rec, dict):
            out.append(request(rec))
    return out, [f"{path}: {torn} torn line(s) skipped"] if torn else []


def read_summary(artifact_dir: Path) -> tuple[dict | None, list[str]]:
    path = Path(artifact_dir) / SUMMARY
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None, []
    except OSError as err:
        return None, [f"{path}: cannot read it ({err.strerror or err})"]
    except ValueError as err:
        return None, [f"{path}: torn or not JSON ({err}); the point is built from the per-request records"]
    if not isinstance(data, dict):
        return None, [f"{path}: not a JSON object; the point is built from the per-request records"]
    return data, []


def read_window(artifact_dir: Path) -> tuple[float, float] | None:
    """The profiling phase's (start, end), wall-clock seconds, from AIPerf's phase manifest."""
    try:
        data = json.loads((Path(artifact_dir) / PHASES).read_text(errors="replace"))
        phase = next(p for p in data["phases"] if p.get("phase_kind") == "profiling")
        start, end = phase["start_ns"] / 1e9, phase["end_ns"] / 1e9
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
    return (start, end) if end >= start else None


def read_unanswered(artifact_dir: Path) -> int | None:
    """How many profiling requests AIPerf cancelled at its grace's end, as its log says (None: no such line)."""
    try:
        text = (Path(artifact_dir) / LOG).read_text(errors="replace")
    except OSError:
        return None
    found = PHASE_DONE.findall(text)
    return int(found[-1][1].replace(",", "")) if found else None


def read(artifact_dir: Path) -> LoadRecords:
    """AIPerf's output folder as neutral records."""
    requests, problems = read_requests(artifact_dir)
    raw, more = read_summary(artifact_dir)
    summary = {}
    for name, theirs in NAMES.items():
        value = (raw or {}).get(theirs)
        if isinstance(value, dict):
            summary[name] = {k: v for k, v in value.items() if k in ("avg", "p50", "p90", "p99")}
    if raw is not None and "errors" not in summary:
        summary["errors"] = {"avg": 0.0}         # AIPerf omits the key when no request failed
    version = (raw or {}).get("aiperf_version")
    return LoadRecords("aiperf", tuple(requests), summary, raw is not None,
                       version if isinstance(version, str) else None,
                       (raw or {}).get("was_cancelled"), (raw or {}).get("is_complete"), tuple(problems + more),
                       read_window(artifact_dir), read_unanswered(artifact_dir))


def errors_so_far(artifact_dir: Path) -> int:
    """Failed requests AIPerf has recorded so far (its per-request export, while it runs)."""
    try:
        with open(Path(artifact_dir) / RECORDS, "rb") as fh:
            return sum(1 for line in fh if b'"error":' in line)
    except OSError:
        return 0
