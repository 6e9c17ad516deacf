"""Per-case junit properties and the run's markdown summary table (for a PR comment or a step summary).

Properties travel on ``report.user_properties``, which pytest-xdist forwards from workers, so the controller's
collector sees every case of the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .report import get


KEYS = {   # property name -> path in the result JSON
    "output_tps": ("throughput", "output_tps"),
    "output_tps_per_gpu": ("throughput", "output_tps_per_gpu"),
    "total_tps_per_gpu": ("throughput", "total_tps_per_gpu"),
    "gpus": ("throughput", "gpus"),
    "tps_per_user_p50": ("interactivity", "output_tps_per_user", "p50"),
    "ttft_p50_ms": ("latency_ms", "ttft", "p50"),
    "itl_p50_ms": ("latency_ms", "itl", "p50"),
    "error_rate": ("requests", "error_rate"),
    "successful_requests": ("requests", "successful"),
    "effective_concurrency": ("concurrency", "effective_avg"),
    "prefix_cache_hit_rate": ("server", "prefix_cache_hit_rate"),
    "output_token_ratio": ("output_token_ratio",),
}


def properties(result: dict) -> dict[str, object]:
    out: dict[str, object] = {"case_id": result["identity"]["case_id"],
                              "recipe_fingerprint": result["identity"]["recipe_fingerprint"]}
    for name, path in KEYS.items():
        value = get(result, path)
        out[name] = round(value, 4) if isinstance(value, float) else value
    return out


class Collector:
    """Registered as a plugin by servebench.plugin: one row per case, written as markdown at the end."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.rows: dict[str, dict] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        case = props.get("servebench_case")
        if case is None or not (report.when == "call" or report.outcome != "passed"):
            return
        row = self.rows.setdefault(case, {"case_id": case})
        row.update({k: v for k, v in props.items() if k != "servebench_case"})
        row["verdict"] = report.outcome
        if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
            row["reason"] = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.outcome == "failed":
            row["reason"] = _first_line(report.longreprtext)

    def rows_measured(self) -> list[dict]:
        return [r for r in self.rows.values() if r["verdict"] != "skipped"]

    def markdown(self) -> str:
        rows = self.rows_measured()
        lines = ["| case | verdict | output tok/s | per GPU | tok/s/user p50 | TTFT p50 ms | error rate | eff. conc |",
                 "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(rows, key=lambda r: r["case_id"]):
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r["case_id"],
                _verdict(r) + (f": {r['reason']}" if r.get("reason") and r["verdict"] != "passed" else ""),
                _fmt(r.get("output_tps")), _fmt(r.get("output_tps_per_gpu")), _fmt(r.get("tps_per_user_p50")),
                _fmt(r.get("ttft_p50_ms")), _pct(r.get("error_rate")), _fmt(r.get("effective_concurrency"))))
        skipped = [r for r in self.rows.values() if r["verdict"] == "skipped"]
        if skipped:
            lines.append("")
            lines.append(f"{len(skipped)} case(s) skipped; e.g. {skipped[0].get('reason', '')[:200]}")
        return "\n".join(lines) + "\n"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput") or not self.rows_measured():
            return
        results = Path(self.config.getoption("--results-dir"))
        path = results / "summary.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# servebench results\n\n" + self.markdown())
        self.path = path
        try:   # the report must never cost the run its results
            from . import report
            from .plugin import catalog
            self.report = report.write(results, catalog=catalog(self.config),
                                       only={r["case_id"] for r in self.rows_measured()})
        except Exception as err:  # noqa: BLE001
            self.report_error = f"{type(err).__name__}: {err}"

    def terminal_lines(self) -> list[str]:
        rows = sorted(self.rows_measured(), key=lambda r: r["case_id"])
        lines = [f"{'case':40} {'verdict':8} {'tok/s':>9} {'tok/s/GPU':>10} {'tok/s/user':>10} {'errors':>7}"]
        for r in rows:
            lines.append(f"{r['case_id']:40} {_verdict(r):8} {_fmt(r.get('output_tps')):>9} "
                         f"{_fmt(r.get('output_tps_per_gpu')):>10} {_fmt(r.get('tps_per_user_p50')):>10} "
                         f"{_pct(r.get('error_rate')):>7}")
        return lines


def _verdict(row: dict) -> str:
    return row["verdict"] + (" (reused)" if row.get("reused") else "")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("E "):
            return line[2:].strip()[:160]
    return (text.strip().splitlines() or [""])[-1][:160]


def _fmt(x) -> str:
    return "" if x is None else f"{x:,.1f}" if isinstance(x, (int, float)) else str(x)


def _pct(x) -> str:
    return "" if x is None else f"{x:.1%}"

