"""A point's requests in rackbench's own form (rackbench.results.requests): written from what the generator's
reader translated and read back unchanged; the history, the --compare-run gate and report.html read it, so a point
measured by a generator that is not installed here is still added and compared; each rate metric's bootstrap
resamples its own quantity."""

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from rackbench.core.results_folder import ResultsFolder
from rackbench.history import rows
from rackbench.history import store as history
from rackbench.history.compare import blocks, compare_point
from rackbench.load.aiperf import records as aiperf_records
from rackbench.load.records import Request
from rackbench.plugin.gates import evidence
from rackbench.results import files, metrics as registry, requests as request_file
from tests.conftest import run_cli

DATA = Path(__file__).parent / "data"
CASE, PROFILE = "llama-770m-h200-vllm-c8", "llama-770m-h200-vllm"
RECORDED = DATA / "h200-gpu-run/aiperf/vllm-c8"


def test_the_recorded_requests_read_back_unchanged(tmp_path):
    got = aiperf_records.read(RECORDED).requests
    path = request_file.write(tmp_path / "requests.csv", got)
    back = request_file.read(path)
    assert back == list(got) and len(back) > 100
    assert path.read_text().splitlines()[0].split(",") == [name for name, _ in request_file.COLUMNS]


def test_a_requests_file_kept_compressed_reads_the_same_and_a_torn_one_is_refused_naming_it(tmp_path):
    """A results folder kept for the record may hold requests.csv.gz (CaseFolder.requests_archived): read as the
    plain file is, found by the history's reader; a torn archive is one line naming the file, never a traceback."""
    import gzip
    got = aiperf_records.read(RECORDED).requests
    plain = request_file.write(tmp_path / "requests.csv", got)
    packed = tmp_path / "requests.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert request_file.read(packed) == list(got)
    torn = tmp_path / "torn.csv.gz"
    torn.write_bytes(packed.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"torn\.csv\.gz: cannot read it"):
        request_file.read(torn)
    from rackbench.results.model import parse
    rf = ResultsFolder.at(DATA / "h200-7b")
    r = parse(json.loads(rf.point("llama-7b-h200-vllm-c4").read_text()))
    kept = ResultsFolder.at(tmp_path / "kept")
    case = kept.case(r.identity.profile, r.identity.case_id)
    case.root.mkdir(parents=True)
    src = rf.case(r.identity.profile, r.identity.case_id).requests
    case.requests_archived.write_bytes(gzip.compress(src.read_bytes()))
    assert history.requests_of(kept.root, r) == ([q for q in request_file.read(src) if q.profiled], None)


numbers = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64))
words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1)     # any text UTF-8 can hold; "" is None
requests = st.builds(
    Request, phase=st.sampled_from(["warmup", "profiling"]), ok=st.booleans(),
    error=st.one_of(st.none(), st.fixed_dictionaries({"code": st.one_of(st.none(), st.integers(100, 599)),
                                                      "type": words, "message": words})),
    start_s=numbers, end_s=numbers, credit_s=numbers, ttft_ms=numbers, latency_ms=numbers, output_tokens=numbers,
    input_tokens=numbers, session=st.one_of(st.none(), words), turn=st.one_of(st.none(), st.integers()))


@settings(max_examples=60, deadline=None)
@given(st.lists(requests, max_size=8))
def test_any_requests_read_back_unchanged(tmp_path_factory, reqs):
    """Commas, quotes, newlines and NULs in an error message; every float exactly; None as an empty cell."""
    path = tmp_path_factory.mktemp("r") / "requests.csv"
    path.write_bytes(request_file.text(reqs).encode())           # what write() writes, without a sync per example
    assert request_file.read(path) == reqs


@pytest.mark.parametrize("edit, where", [
    (lambda lines: [lines[0].replace("end_s", "finish_s")] + lines[1:], "line 1: not a rackbench requests file "
                                                                        "(no column end_s"),
    (lambda lines: [lines[0], lines[1].replace("profiling,1,", "profiling,2,", 1)] + lines[2:], "line 2: column ok: "
                                                                                               "'2' is not 0 or 1"),
    (lambda lines: [lines[0], "profiling,1"] + lines[2:], "line 2: 2 cells, the header has 14"),
    (lambda lines: [lines[0], lines[1], "," + lines[2].split(",", 1)[1]] + lines[3:], "line 3: column phase: empty"),
    (lambda lines: [lines[0], lines[1], ",".join(["profiling", "1", "nan", *lines[2].split(",")[3:]])] + lines[3:],
     "line 3: column start_s: 'nan' is not a finite number"),
    (lambda lines: lines[:-1] + [",".join([*lines[-1].split(",")[:10], "2.5", *lines[-1].split(",")[11:]])],
     "line 406: column turn: invalid literal for int()"),        # the last of 405 rows
])
def test_an_edited_requests_file_is_refused_naming_the_line_and_column(tmp_path, edit, where):
    path = request_file.write(tmp_path / "requests.csv", aiperf_records.read(RECORDED).profiled)
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    with pytest.raises(ValueError) as err:
        request_file.read(path)
    assert str(err.value).startswith(f"{path}: {where}")


def results_of(tmp_path: Path, generator: str, with_requests: bool) -> Path:
    """The recorded H200 point as if a site's generator (not installed here) had measured it."""
    d = tmp_path / f"{generator}-{with_requests}"
    r = json.loads((DATA / "h200-gpu-run/points/llama-770m-h200-vllm-c8.json").read_text())
    r["run"]["generator"] = generator
    (d / "points").mkdir(parents=True)
    (d / "points" / f"{CASE}.json").write_text(json.dumps(r))
    if with_requests:
        request_file.write(ResultsFolder.at(d).case(PROFILE, CASE).requests, aiperf_records.read(RECORDED).requests)
    return d


def test_a_point_of_a_generator_not_installed_here_is_added_with_its_requests(tmp_path):
    db = tmp_path / "h.sqlite"
    res = run_cli("history", "add", results_of(tmp_path, "sitegen", True), "--history", db)
    assert res.returncode == 0, res.stderr
    with contextlib.closing(history.connect(db, create=False)) as con:
        (run,) = [x["run_id"] for x in rows.runs(con)]
        p = rows.point(con, run, CASE)
    profiled = aiperf_records.read(RECORDED).profiled
    assert p["requests"] == [Request("profiling", q.ok, None, q.start_s, q.end_s, None, q.ttft_ms, q.latency_ms,
                                     q.output_tokens, q.input_tokens) for q in profiled]
    assert all(c.verdict == "within noise" for c in compare_point(p, p))     # bootstrapped from them


def test_an_older_point_without_its_requests_file_is_added_without_them_and_says_why(tmp_path):
    db = tmp_path / "h.sqlite"
    res = run_cli("history", "add", results_of(tmp_path, "sitegen", False), "--history", db)
    assert res.returncode == 0, res.stderr
    assert f"{CASE}: added without its requests (no requests.csv, and its load generator 'sitegen' is not " \
           "installed here)" in res.stdout
    with contextlib.closing(history.connect(db, create=False)) as con:
        (run,) = [x["run_id"] for x in rows.runs(con)]
        p = rows.point(con, run, CASE)
    assert p["requests"] == [] and {c.verdict for c in compare_point(p, p)} == {"no records"}


def test_a_store_from_before_the_prompt_columns_is_read_and_gains_them(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript(history.SCHEMA.replace(", input_tokens REAL, start_s REAL", ""))
    con.close()
    old = results_of(tmp_path, "aiperf", True)
    with contextlib.closing(history.connect(db, create=False)) as con:
        assert rows.runs(con) == []                                         # read-only: left as it was
    history.add(db, old)
    with contextlib.closing(sqlite3.connect(db)) as con:
        cols = [row[1] for row in con.execute("PRAGMA table_info(requests)")]
        assert cols[-2:] == ["input_tokens", "start_s"]
        assert con.execute("SELECT COUNT(*) FROM requests WHERE input_tokens IS NULL").fetchone() == (0,)
        con.executescript("ALTER TABLE requests DROP COLUMN start_s; ALTER TABLE requests DROP COLUMN input_tokens")
    with contextlib.closing(history.connect(db, create=False)) as con:          # an older store, read as it is
        (run,) = [x["run_id"] for x in rows.runs(con)]
        p = rows.point(con, run, CASE)
    assert p["requests"] and all(q.input_tokens is None and q.end_s for q in p["requests"])
    assert {c.metric: c.verdict for c in compare_point(p, p)}["total_tps_per_gpu"] == "no records"


def _window(prompt: float, n: int = 400, every_s: float = 0.5) -> list[Request]:
    return [Request("profiling", True, end_s=1000 + i * every_s, ttft_ms=50, latency_ms=500, output_tokens=100,
                    input_tokens=prompt) for i in range(n)]


def test_each_rate_metric_bootstraps_its_own_quantity():
    """The same output tokens every slice, twice the prompt tokens in B: total tok/s per GPU is better with an
    interval around its own change (+100% of prompt: +95%); output tok/s per GPU has no change at all. Before,
    every rate was given the output-token interval."""
    a = {"requests": _window(2000), "duration_s": 200, "gpus": 1, "output_tps_per_gpu": 200.0,
         "total_tps_per_gpu": 4200.0}
    b = {**a, "requests": _window(4000), "total_tps_per_gpu": 8200.0}
    by = {c.metric: c for c in compare_point(a, b, metrics=("output_tps_per_gpu", "total_tps_per_gpu"))}
    total, out = by["total_tps_per_gpu"], by["output_tps_per_gpu"]
    assert total.verdict == "better" and total.low <= 8200 / 4200 - 1 <= total.high and total.high < 1.0
    assert out.verdict == "within noise" and out.low <= 0 <= out.high
    parts = blocks(registry.METRICS["total_tps_per_gpu"], b["requests"], b["duration_s"])
    assert len(parts[0]) == 4 and parts[0][0] == pytest.approx(10 * 4100)   # 20 s blocks of 5 s slices of 10 requests


def test_a_rate_metric_without_its_slice_quantity_is_refused():
    with pytest.raises(ValueError, match="bootstrap by time needs per_slice"):
        registry.Metric("x", "x", "rate", lambda r: None, "higher", compared=True, bootstrap="time")


def test_the_gate_reads_this_points_own_requests_file(tmp_path):
    """--compare-run's evidence for the old H200 point against the newer run: from the old point's requests file,
    with no AIPerf files anywhere beside it."""
    db = tmp_path / "h.sqlite"
    history.add(db, results_of(tmp_path, "aiperf", True))
    old = tmp_path / "old-requests.csv"
    request_file.write(old, aiperf_records.read(DATA / "h200-suite-run/vllm-c8").requests)
    r_old = files.read(DATA / "h200-suite-run/vllm-c8/result-as-judged-then.json")
    runs, change = evidence(db, "20261201-05", r_old, old)
    assert runs.startswith("20261201-055706") and change.verdict == "worse" and change.high < 0
    shutil.copy(old, tmp_path / "empty.csv")
    (tmp_path / "empty.csv").write_text(old.read_text().splitlines()[0] + "\n")
    _, blind = evidence(db, "20261201-05", r_old, tmp_path / "empty.csv")
    assert blind.verdict == "too few repeats" or blind.low is None          # no requests: no bootstrap to give

