"""#32 item 4: energy and cost of a point's tokens. GPU board energy over the measured window from the 1 s power
samples (a real nvidia-smi CSV of the H200), and cost per million tokens where the cluster file names a price."""

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.catalog.points import Point
from rackbench.core.errors import ConfigError
from rackbench.load.aiperf import records as aiperf_records
from rackbench.recipe.schema.cluster import Cost
from rackbench.report.summary import properties
from rackbench.results.window import window_of
from rackbench.results.energy import block, window_energy
from rackbench.server.machine import power_samples, read_samples
from tests.conftest import REPO, by_id, edit, recorded

CSV = REPO / "tests/data/h200-machine/alone/telemetry.csv"     # 38 one-second samples of an H200, as nvidia-smi wrote
RUN = REPO / "tests/data/h200-gpu-run/aiperf/vllm-c8"


def test_power_samples_are_placed_on_the_wall_clock_from_the_samplers_start():
    rows = read_samples(CSV)
    got = power_samples(rows, started=1000.0)
    assert len(got) == len(rows) == 38
    assert got[0] == (1000.0, "GPU-f6eae81f-2450-2049-4a99-36fcacd839d3", 82.40)
    assert got[1][0] == pytest.approx(1001.009) and all(b[0] > a[0] for a, b in zip(got, got[1:]))


def test_energy_sums_the_samples_inside_the_window_only():
    power = power_samples(read_samples(CSV), started=1000.0)
    inside = [w for t, _, w in power if 1005.0 <= t <= 1020.0]
    energy, gpus = window_energy(power, 1005.0, 1020.0, 1.0)
    assert (energy, gpus) == (pytest.approx(sum(inside)), 1) and len(inside) == 15
    assert window_energy(power, 2000.0, 2010.0, 1.0) == (None, 0)


def test_cost_per_million_tokens_is_inferencexs_formula_and_never_assumed():
    b = block([], 1.0, (0.0, 100.0), 5000.0, output_tps=500.0, total_tps=4000.0, gpus=16, cost=Cost(gpu_hour=3.5))
    assert b["cost_per_m_output_tokens"] == pytest.approx(3.5 * 16 * 1e6 / (3600 * 500))        # 31.1 per 1M
    assert b["cost_per_m_total_tokens"] == pytest.approx(3.5 * 16 * 1e6 / (3600 * 4000))
    assert b["energy_j"] is None and b["energy_basis"] == "no GPU power samples in the measured window"
    assert block([], 1.0, (0.0, 100.0), 5000.0, 500.0, 4000.0, gpus=16, cost=None) is None      # no price, no samples


@pytest.mark.catalog("h200")
def test_a_point_with_power_samples_and_a_priced_cluster_reports_its_energy_and_cost(recipes):
    edit(recipes / "clusters/local-h200.yaml", "gpus_per_node: 1\n", "gpus_per_node: 1\ncost: {gpu_hour: 2.5}\n")
    prof = by_id(Catalog.load(recipes), "llama-770m-h200-vllm")
    start, end = window_of(aiperf_records.read(RUN).profiled)
    steps = int(end - start) + 3          # 1 s samples of one GPU at a steady 300 W, from a second before the window
    power = [(start - 1 + i, "GPU-x", 300.0) for i in range(steps)]
    r = recorded(Point(prof, 8), RUN, power=power, telemetry={"source": "nvidia-smi", "interval_s": 1.0, "gpus": []})
    e = r.economics
    inside = sum(1 for t, _, _ in power if start <= t <= end)
    assert e.energy_j == pytest.approx(300.0 * inside) and e.gpus_sampled == 1
    assert e.mean_power_w == pytest.approx(300.0, rel=0.05)
    tokens = sum(q.output_tokens for q in aiperf_records.read(RUN).profiled if q.ok)
    assert e.joules_per_output_token == pytest.approx(e.energy_j / tokens)
    assert e.cost_per_m_output_tokens == pytest.approx(2.5 * 1 * 1e6 / (3600 * r.throughput.output_tps))
    assert (e.gpu_hour_price, e.currency) == (2.5, "USD") and "board power" in e.energy_basis
    props = properties(r)
    assert props["joules_per_output_token"] == e.joules_per_output_token
    assert props["cost_per_m_output_tokens"] == e.cost_per_m_output_tokens


@pytest.mark.parametrize("cost, said", [("{gpu_hour: -1}", "cost.gpu_hour"), ("{gpu_hours: 2}", "cost.gpu_hours")])
@pytest.mark.catalog("h200")
def test_a_bad_price_is_refused_naming_the_file_and_key(recipes, cost, said):
    edit(recipes / "clusters/local-h200.yaml", "gpus_per_node: 1\n", f"gpus_per_node: 1\ncost: {cost}\n")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    assert "local-h200.yaml" in str(err.value) and said in str(err.value), str(err.value)
