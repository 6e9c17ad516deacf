"""#57 item 5: `rackbench export --inferencex DIR` writes each point as the seed system's agentic aggregate, and
their list as agg_<name>.json. Each field is checked against figures worked here by hand from the point's requests
file by the seed's rules (utils/agentic/aggregation: successful profiled requests; the window from the first start
to the last end; per GPU over the point's GPUs; seconds; ITL = (latency - TTFT) / (output tokens - 1);
interactivity = 1 / the ITL statistic; percentiles by linear interpolation between closest ranks)."""

import csv
import gzip
import json

from tests.conftest import REPO, run_cli

SEARCH = REPO / "tests/data/h100-7b-search"
CASE = "llama-7b-h200-vllm_search-c20"


def seed_percentile(data, p):
    """The seed's own definition, written out: rank k = (n - 1) p / 100, interpolated between its neighbours."""
    data = sorted(data)
    k = (len(data) - 1) * p / 100
    f = int(k)
    return data[f] if f + 1 >= len(data) else data[f] + (k - f) * (data[f + 1] - data[f])


def test_a_point_exported_is_the_seeds_aggregate_of_its_requests(tmp_path):
    done = run_cli("export", SEARCH, "--inferencex", tmp_path / "ix", "--name", "h100")
    assert done.returncode == 0, done.stderr
    agg = json.loads((tmp_path / "ix" / f"{CASE}.json").read_text())
    listed = json.loads((tmp_path / "ix" / "agg_h100.json").read_text())
    assert len(listed) == 6 and agg in listed

    path = SEARCH / "llama-7b-h200-vllm_search" / CASE / "requests.csv.gz"
    rows = list(csv.DictReader(gzip.open(path, "rt")))
    good = [r for r in rows if r["phase"] == "profiling" and r["ok"] == "1"]
    starts, ends = [float(r["start_s"]) for r in good], [float(r["end_s"]) for r in good]
    window = max(ends) - min(starts)
    out_tokens = sum(int(float(r["output_tokens"])) for r in good)
    in_tokens = sum(int(float(r["input_tokens"])) for r in good)
    ttft = [float(r["ttft_ms"]) / 1000 for r in good]
    e2el = [float(r["latency_ms"]) / 1000 for r in good]
    itl = [(float(r["latency_ms"]) - float(r["ttft_ms"])) / (float(r["output_tokens"]) - 1) / 1000 for r in good]

    assert (agg["conc"], agg["tp"], agg["ep"], agg["kv_offloading"]) == (20, 1, 1, "none")
    assert agg["num_requests_total"] == len(rows) and agg["num_requests_successful"] == len(good)
    acc = agg["request_accounting"]
    assert acc["records_warmup_dropped"] == sum(r["phase"] == "warmup" for r in rows) > 0
    t = agg["request_metrics"]["throughput"]
    assert abs(t["duration_seconds"] - window) < 1e-4
    assert abs(t["output"]["tokens_per_second"] - out_tokens / window) < 1e-3
    assert abs(t["per_gpu"]["total_tput_tps"] - (in_tokens + out_tokens) / window / 1) < 1e-2   # one GPU
    lat = agg["request_metrics"]["latency"]
    assert abs(lat["ttft"]["p50"] - seed_percentile(ttft, 50)) < 1e-5
    assert abs(lat["e2el"]["p95"] - seed_percentile(e2el, 95)) < 1e-5
    assert abs(lat["itl"]["mean"] - sum(itl) / len(itl)) < 1e-5
    assert abs(lat["intvty"]["p50"] - 1 / seed_percentile(itl, 50)) < 1e-3
    assert lat["tpot"] == lat["itl"]
    q = agg["request_metrics"]["qps"]
    first, last = min(ends), max(ends)
    counts = [sum(1 for e in ends if first + i <= e < first + i + 1) for i in range(int(last - first))]
    assert q["samples"] == len(counts) and abs(q["mean"] - sum(counts) / len(counts)) < 1e-4


def test_a_folder_without_points_is_one_line(tmp_path):
    (tmp_path / "points").mkdir()
    done = run_cli("export", tmp_path, "--inferencex", tmp_path / "ix")
    assert done.returncode == 1 and "no point to export" in done.stderr and "Traceback" not in done.stderr
