"""One definition per metric (rackbench.results.metrics): a metric added in one place reaches every output that
shows or compares metrics, and every number reads through the one formatter (rackbench.core.format)."""

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from rackbench.core.format import clip, interval, number
from rackbench.history import rows, store
from rackbench.report import summary
from rackbench.report.files import points_csv
from rackbench.results import metrics as registry
from rackbench.results.files import load_points
from tests.conftest import run_cli

NOISE = Path(__file__).parent / "data" / "noise-local"
REQ_RATE = registry.Metric("request_rate", "requests per second", "rate", lambda r: r.throughput.requests_per_s,
                           "higher", frozenset({"summary", "terminal", "report"}), compared=True)


def test_a_metric_added_in_one_place_is_in_every_output(tmp_path):
    points, _ = load_points(NOISE / "run-1")
    r = points[0]
    with registry.registered(REQ_RATE):
        value = r.throughput.requests_per_s
        assert summary.properties(r)["request_rate"] == value                             # junit
        rows = list(csv.DictReader(io.StringIO(points_csv(points))))                       # points.csv
        assert float(rows[0]["request_rate"]) == pytest.approx(points[0].throughput.requests_per_s)
        table = summary.markdown([{"case_id": r.identity.case_id, "verdict": "passed", **summary.properties(r)}], [])
        assert "requests per second" in table and number(value, "rate") in table        # the summary table
        db = tmp_path / "history.sqlite"
        for run in ("run-1", "run-2", "run-3"):                                            # the history
            store.add(db, NOISE / run)
        con = store.connect(db, create=False)
        stored = dict(con.execute("SELECT case_id, value FROM metrics WHERE name = 'request_rate'"))
        assert stored and all(v > 0 for v in stored.values())
        con.close()
        ids = [json.loads(next((NOISE / n / "points").glob("*.json")).read_text())["identity"]["run_id"]
               for n in ("run-1", "run-2", "run-3")]
        res = run_cli("compare", ids[0], ids[2], "--history", db)                          # rackbench compare
        assert res.returncode == 0, res.stderr
        line = next(ln for ln in res.stdout.splitlines() if "requests per second" in ln)
        assert "within noise" in line and "[" in line      # pooled run-to-run noise of the run not on trial
        from rackbench.report import html                                                # report.html's table
        page = html.collect(db)
        column = page["columns"].index("requests per second")
        cells = {p["case"]: p["cells"][column] for p in page["runs"][0]["points"]}
        assert cells[r.identity.case_id] == number(value, "rate", missing="")
    assert "request_rate" not in registry.METRICS


def test_a_metric_a_history_does_not_hold_yet_is_computed_from_its_stored_results(tmp_path):
    """A history written before a metric existed still compares it (computed from each stored result)."""
    db = tmp_path / "history.sqlite"
    store.add(db, NOISE / "run-1")
    with registry.registered(REQ_RATE):
        con = store.connect(db, create=False)
        run = rows.runs(con)[0]["run_id"]
        case = rows.cases(con, run)[0]
        assert rows.point(con, run, case)["request_rate"] > 0
        con.close()


def test_a_metric_is_refused_without_a_known_unit_or_with_a_second_definition():
    with pytest.raises(ValueError, match="unknown unit 'parsecs'"):
        registry.Metric("x", "x", "parsecs", lambda r: 1)
    with pytest.raises(ValueError, match="already defined"):
        registry.register(registry.Metric("output_tps", "again", "tok/s", lambda r: 1))


@pytest.mark.parametrize("value, unit, text", [
    (0.6455, "share", "64.5%"), (0.6466, "share", "64.7%"), (1079920.0, "count", "1,079,920"),
    (1079.94, "tok/s", "1,079.9"), (0.0, "ms", "0.0"), (0.004, "ms", "<0.1"), (None, "ms", "—"),
    (float("nan"), "tok/s", "—"), (-0.145, "change", "-14.5%"), (0.0123, "points", "+1.2 pts"), (1.114, "ratio", "1.11x"),
])
def test_one_formatter(value, unit, text):
    assert number(value, unit) == text


def test_one_value_reads_the_same_in_the_summary_and_report_md(tmp_path):
    """The summary and report.md once rounded one share two ways (64.5% and 64.6%)."""
    from rackbench.report import files
    d = tmp_path / "results"
    shutil.copytree(NOISE / "run-1", d)
    points, _ = load_points(d)
    md = files.write(d).files[0].read_text()
    table = summary.markdown([{"case_id": r.identity.case_id, "verdict": "passed", **summary.properties(r)}
                              for r in points], [])
    for r in points:
        for metric in (m for m in registry.shown("summary") if "report" in m.shown):
            cell = number(metric.get(r), metric.unit)
            assert cell in md and cell in table, (metric.name, cell)


def test_intervals_and_reasons_read_whole():
    assert interval(-0.142, 0.166) == "[-14.2%, +16.6%]" and interval(None, 1) == ""
    reason = "needs cluster gb200-nv (4 x GB200 GPUs per node via slurm); run on its login node with --cluster gb200-nv"
    cut = clip(reason, 60)
    kept = cut[:-1]
    assert len(cut) <= 60 and cut.endswith("…") and reason.startswith(kept) and reason[len(kept)] == " "   # a word
