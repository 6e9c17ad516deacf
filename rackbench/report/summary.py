"""A session's summary: junit properties per case (every metric of the registry, unformatted) and the summary
table (markdown for a PR comment, lines for the terminal), whose columns are the metrics the registry shows there
(rackbench.results.metrics) and whose numbers come from the one formatter (rackbench.core.format).

Rows are plain dicts (case id, verdict, reason, metrics by name): the pytest plugin collects them from the reports
pytest and xdist deliver (rackbench.plugin.collector)."""

from __future__ import annotations

from rackbench.core.format import clip, number
from rackbench.results import metrics as registry
from rackbench.results.card import label
from rackbench.results.model import PointResult

REASON_WIDTH = 200


def properties(result: PointResult) -> dict[str, object]:
    """junit properties of one point: identity, every metric (unrounded), the stored verdict."""
    out: dict[str, object] = {"case_id": result.identity.case_id,
                              "recipe_fingerprint": result.identity.recipe_fingerprint}
    for name, value in registry.values(result).items():
        out[name] = value
    if result.bound is not None:
        out["bound"] = result.bound.bound
    if result.reuse is not None and result.reuse.gap is not None:      # rackbench.results.reuse
        u = result.reuse
        out.update({"reuse_allowed_share": u.allowed_share, "reuse_measured_share": u.measured_share,
                    "reuse_should_hold": u.should_hold})
    if result.identity.card_differs:      # rackbench.results.card: not the cluster file's card
        out["ran_on"] = label(result.identity)
    if result.verdict is not None:
        out["verdict"] = "passed" if result.verdict.passed else "failed"
    return out


def _case(row: dict) -> str:
    return row["case_id"] + (f" (ran on {row['ran_on']})" if row.get("ran_on") else "")


def _verdict(row: dict) -> str:
    return row["verdict"] + (" (reused)" if row.get("reused") else "")


def _value(row: dict, metric: registry.Metric) -> str:
    value = row.get(metric.name)
    if isinstance(value, str):        # junit properties travel as strings through xdist
        try:
            value = float(value)
        except ValueError:
            return value
    return number(value, metric.unit)


def markdown(rows: list[dict], skipped: list[dict]) -> str:
    columns = registry.shown("summary")
    head = ["case", "verdict", "bound", *(m.label for m in columns)]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * len(columns)]
    for r in rows:
        verdict = _verdict(r) + (f": {clip(r['reason'], REASON_WIDTH)}" if r.get("reason") and
                                 r["verdict"] != "passed" else "")
        lines.append("| " + " | ".join([_case(r), verdict, r.get("bound") or "—",
                                        *(_value(r, m) for m in columns)]) + " |")
    if skipped:
        lines += ["", f"{len(skipped)} case(s) skipped; e.g. {clip(skipped[0].get('reason', ''), REASON_WIDTH)}"]
    return "\n".join(lines) + "\n"


def terminal_lines(rows: list[dict]) -> list[str]:
    columns = registry.shown("terminal")
    width = max([40] + [len(_case(r)) for r in rows])
    lines = [f"{'case':{width}} {'verdict':8} " + " ".join(f"{clip(m.label, 22):>22}" for m in columns)]
    for r in rows:
        lines.append(f"{_case(r):{width}} {_verdict(r):8} " + " ".join(f"{_value(r, m):>22}" for m in columns))
    return lines
