"""The summary's rows, collected from the reports pytest (and pytest-xdist) deliver to the controller.

Properties travel on ``report.user_properties``, which xdist forwards from its workers, so the controller sees
every case of the run."""

from __future__ import annotations

import pytest

from rackbench.report import summary


class Collector:
    """One row per case: its id, verdict (passed, failed, skipped), reason, and junit properties."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        case = props.get("rackbench_case")
        if case is None or not (report.when == "call" or report.outcome != "passed"):
            return
        row = self.rows.setdefault(case, {"case_id": case})
        row.update({k: v for k, v in props.items() if k != "rackbench_case"})
        row["verdict"] = report.outcome
        if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
            row["reason"] = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.outcome == "failed":
            row["reason"] = first_error_line(report.longreprtext)

    def measured(self) -> list[dict]:
        return sorted((r for r in self.rows.values() if r["verdict"] != "skipped"), key=lambda r: r["case_id"])

    def case_ids(self) -> set[str]:
        """Every point this session measured: its cases, and the probes of its searches."""
        out = set()
        for row in self.measured():
            out.add(row["case_id"])
            out |= {c for c in str(row.get("rackbench_probes") or "").split(",") if c}
        return out

    def skipped(self) -> list[dict]:
        return [r for r in self.rows.values() if r["verdict"] == "skipped"]

    def markdown(self) -> str:
        return summary.markdown(self.measured(), self.skipped())

    def terminal_lines(self) -> list[str]:
        return summary.terminal_lines(self.measured())


def first_error_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("E "):
            return line[2:].strip()
    return (text.strip().splitlines() or [""])[-1]
