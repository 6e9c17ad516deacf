"""#57 item 4: latency as users of the schedule feel it (coordinated omission): each request's TTFT and end-to-end
latency counted from its credit (when its schedule let it go), the client's send delay beside them, and that delay
as the client-bound evidence where the generator's summary has none. On real recordings: the CPU grid, whose client
shared two cores with the server, sent late; the H100 point's client did not."""

from pathlib import Path

import pytest

from rackbench.load.records import Request
from rackbench.results import omission, requests as request_file
from rackbench.results.bound import client_late, issue_p99
from rackbench.results.model import Concurrency
from rackbench.results.parts import Dist, FromIntended
from rackbench.recipe.schema.sweep import Gates
from tests.conftest import REPO

CPU = REPO / "tests/data/grid-cpu/tiny-llama-cpu-grid_hi/tiny-llama-cpu-grid_hi-c16/requests.csv.gz"
H100 = REPO / "tests/data/noise-h100-7b/run-2/llama-7b-h200-vllm/llama-7b-h200-vllm-c32/requests.csv.gz"


def sent(t, delay_ms, ttft=100.0, latency=400.0, ok=True, credit=True):
    start = 1000.0 + t
    return Request("profiling", ok, start_s=start, end_s=start + latency / 1000,
                   credit_s=start - delay_ms / 1000 if credit else None, ttft_ms=ttft, latency_ms=latency)


def test_a_late_send_is_counted_into_the_latency_from_the_schedule():
    qs = [sent(i, 0.0) for i in range(95)] + [sent(100 + i, 1000.0) for i in range(5)]
    got = omission.block(qs)
    assert got["requests"] == 100 and got["differs"] is True
    assert got["ttft"]["p50"] == pytest.approx(100.0) and got["ttft"]["p99"] == pytest.approx(1100.0)
    assert got["e2e"]["p99"] == pytest.approx(1400.0) and got["delay_ms"]["p99"] == pytest.approx(1000.0)
    assert got["delay_ms"]["avg"] == pytest.approx(50.0)


def test_on_time_sends_leave_it_as_measured_and_what_has_no_credit_is_left_out():
    qs = [sent(i, 1.0) for i in range(50)] + [sent(60, 5000.0, ok=False), sent(61, 5000.0, credit=False)]
    got = omission.block(qs)
    assert got["requests"] == 50 and got["differs"] is False and got["ttft"]["p99"] == pytest.approx(101.0)
    assert omission.block([sent(1, 0.0, credit=False)]) is None and omission.block([]) is None


@pytest.mark.parametrize("path, differs", [(CPU, True), (H100, False)])
def test_recorded_points_each_request_counted_from_its_credit(path: Path, differs):
    profiled = [q for q in request_file.read(path) if q.profiled]
    got = omission.block(profiled)
    assert got["differs"] is differs, got
    ok = [q for q in profiled if q.ok and q.credit_s is not None and q.start_s is not None]
    late = [max(0.0, (q.start_s - q.credit_s) * 1000) for q in ok]
    assert got["requests"] == len(ok) and got["delay_ms"]["avg"] == pytest.approx(sum(late) / len(late))
    mean_ttft = sum(q.ttft_ms for q in ok) / len(ok)
    assert got["ttft"]["avg"] == pytest.approx(mean_ttft + got["delay_ms"]["avg"])
    # the CPU client sent a p99 request ~0.5 s late; the H100 one within 2 ms
    assert (got["delay_ms"]["p99"] > 100) is differs and got["delay_ms"]["p99"] > 0


def test_the_send_delay_is_the_client_bound_evidence_where_the_summary_has_none():
    gates = Gates()
    conc = Concurrency(target=16, effective_avg=None, ratio=None)
    late = FromIntended.model_validate(omission.block([sent(i, 400.0) for i in range(20)]))
    assert issue_p99(conc, late) == pytest.approx(400.0) and client_late(conc, gates, late)
    assert issue_p99(conc) is None and not client_late(conc, gates)
    summary = Concurrency(target=16, effective_avg=None, ratio=None,
                          issue_latency_ms=Dist(avg=1.0, p50=1.0, p90=1.0, p99=2.0))
    assert issue_p99(summary, late) == 2.0 and not client_late(summary, gates, late)   # the generator's own first


def test_report_md_lists_the_points_whose_client_sent_late():
    from rackbench.report.files import omission_lines
    from rackbench.results.files import read
    r = read(REPO / "tests/data/grid-cpu/points/tiny-llama-cpu-grid_hi-c16.json")
    profiled = [q for q in request_file.read(CPU) if q.profiled]
    late = r.model_copy(update={"latency_ms": r.latency_ms.model_copy(update={
        "from_intended": FromIntended.model_validate(omission.block(profiled))})})
    lines = omission_lines([late, r])
    assert lines[1] == "## Latency from the schedule: clients that sent late"
    (row,) = [ln for ln in lines if ln.startswith("| tiny-llama")]
    assert row.startswith("| tiny-llama-cpu-grid_hi-c16 | ") and row.count("|") == 7, row
    assert omission_lines([r]) == []          # recorded before the field: nothing to say
