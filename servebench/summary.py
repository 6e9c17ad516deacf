"""Per-case junit properties and the run's summary table (markdown for a PR comment, lines for the terminal).

Properties travel on ``report.user_properties``, which pytest-xdist forwards from workers, so the controller's
collector sees every case of the run. Columns are the result model's headline metrics
(:data:`servebench.result.METRICS`).
"""

from __future__ import annotations

import pytest

from .result import METRICS, PointResult, metrics

# The summary's columns, in order (offload arms add the CPU-tier columns).
COLUMNS = ("output_tps", "output_tps_per_gpu", "tps_per_user_p50", "ttft_p50_ms", "error_rate",
           "effective_concurrency", "cpu_tier_hit_share", "prompt_tokens_from_cpu_tier")
TERMINAL = ("output_tps", "output_tps_per_gpu", "tps_per_user_p50", "error_rate", "cpu_tier_hit_share")


def properties(result: PointResult) -> dict[str, object]:
    """junit properties of one point: identity, every headline metric, the stored verdict."""
    out: dict[str, object] = {"case_id": result.identity.case_id,
                              "recipe_fingerprint": result.identity.recipe_fingerprint}
    for name, value in metrics(result).items():
        out[name] = round(value, 4) if isinstance(value, float) else value
    if result.verdict is not None:
        out["verdict"] = "passed" if result.verdict.passed else "failed"
    return out


class Collector:
    """One row per case, from the reports pytest (and xdist) deliver to the controller."""

    def __init__(self) -> None:
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

    def measured(self) -> list[dict]:
        return sorted((r for r in self.rows.values() if r["verdict"] != "skipped"), key=lambda r: r["case_id"])

    def markdown(self) -> str:
        head = ["case", "verdict", *(METRICS[c].label for c in COLUMNS)]
        lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
        for r in self.measured():
            verdict = _verdict(r) + (f": {r['reason']}" if r.get("reason") and r["verdict"] != "passed" else "")
            lines.append("| " + " | ".join([r["case_id"], verdict, *(cell(r.get(c), METRICS[c].kind)
                                                                      for c in COLUMNS)]) + " |")
        skipped = [r for r in self.rows.values() if r["verdict"] == "skipped"]
        if skipped:
            lines += ["", f"{len(skipped)} case(s) skipped; e.g. {skipped[0].get('reason', '')[:200]}"]
        return "\n".join(lines) + "\n"

    def terminal_lines(self) -> list[str]:
        lines = [f"{'case':40} {'verdict':8} " + " ".join(f"{METRICS[c].label[:14]:>14}" for c in TERMINAL)]
        for r in self.measured():
            lines.append(f"{r['case_id']:40} {_verdict(r):8} "
                         + " ".join(f"{cell(r.get(c), METRICS[c].kind):>14}" for c in TERMINAL))
        return lines


def cell(x, kind: str = "num") -> str:
    """One table cell: blank when not measured."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return "" if x is None else str(x)
    return f"{x:.1%}" if kind == "pct" else f"{x:,.1f}"


def _verdict(row: dict) -> str:
    return row["verdict"] + (" (reused)" if row.get("reused") else "")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("E "):
            return line[2:].strip()[:160]
    return (text.strip().splitlines() or [""])[-1][:160]
