"""The machine a point ran on, offline: GPU telemetry summarized from nvidia-smi's samples, and what
`rackbench compare` says differed between two groups of runs' machines."""

import json

import pytest

from rackbench.history import machines
from rackbench.results.model import parse, upgrade
from rackbench.results.schema import file_problems
from rackbench.server.machine import TELEMETRY, read_samples, sampler_argv, summarize
from tests.conftest import REPO

OLD = REPO / "tests/data/results-local/points/tiny-llama-cpu-vllm-c1.json"
H200 = REPO / "tests/data/h200-machine"
H200_POINTS = REPO / "tests/data/h200-point-record/points"
NOISE_H200 = REPO / "tests/data/noise-h200/run-1/points"


def gpu(**over) -> dict:
    return {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-aaaa", "driver": "570.124.06", "cuda": "12.8",
            "power_limit_w": 700.0, "power_max_limit_w": 700.0, "max_sm_clock_mhz": 1980.0, "max_mem_clock_mhz": 3201.0,
            "memory_mib": 143771.0, "pci_bus_id": "00000000:19:00.0", "persistence_mode": "Enabled",
            "compute_mode": "Default", **over}


def result(gpu_record: dict, sm_clock: float, processes=()) -> object:
    data = upgrade(json.loads(OLD.read_text()))            # a real result of this machine, as schema 4 reads it
    stat = lambda x: {"mean": x, "min": x, "max": x}  # noqa: E731
    data["machine"] = {"nodes": [{"node": "local0", "rank": 0, "host": "h200-a", "kernel": "6.8", "cpu": "Xeon",
                                  "cores": 16, "cores_usable": 16, "memory_gib": 125.7, "loadavg": [0.1, 0.2, 0.3],
                                  "python": "3.12.3", "gpus": [gpu_record], "gpu_processes": list(processes),
                                  "problems": []}], "extra": {}}
    data["telemetry"] = {"source": "nvidia-smi", "interval_s": 1.0, "gpus": [
        {"node": "local0", "index": 0, "uuid": gpu_record["uuid"], "samples": 40, "sm_clock_mhz": stat(sm_clock),
         "mem_clock_mhz": stat(3201.0), "power_w": stat(420.0), "temperature_c": stat(55.0),
         "utilization_pct": stat(90.0), "memory_used_mib": stat(120000.0)}]}
    return parse(data)


def test_compare_names_what_differed_between_the_machines():
    a = [result(gpu(), 1980.0)]
    b = [result(gpu(power_limit_w=500.0, uuid="GPU-bbbb"), 1650.0,
                [{"gpu_uuid": "GPU-bbbb", "pid": 4242, "name": "python3", "memory_mib": 30000.0}])]
    lines = machines.differences(a, b)
    assert "GPU0 power limit: 700 W -> 500 W" in lines
    assert "GPU0 UUID: GPU-aaaa -> GPU-bbbb" in lines
    assert "GPU processes before the servers: none -> python3 (30,000 MiB)" in lines      # another tenant
    assert "SM clock during the points (mean): 1,980 MHz -> 1,650 MHz" in lines
    assert not any(line.startswith(("GPU0 driver", "GPU power", "host")) for line in lines)  # what did not change
    assert machines.differences(a, [result(gpu(), 1985.0)]) == []                          # within 3%: no line


def test_a_result_without_a_machine_record_says_so():
    old = parse(json.loads(OLD.read_text()))
    assert old.machine is None
    lines = machines.differences([old], [result(gpu(), 1980.0)])
    assert lines[0] == "machine record: none (a result of schema 3 or older, or a run that recorded none) -> —"
    assert "GPU0 model: — -> NVIDIA H200" in lines


def test_telemetry_is_summarized_per_gpu_from_nvidia_smi_samples():
    """nvidia-smi --query-gpu ... --format=csv,noheader,nounits -lms: a line per GPU per sample, in TELEMETRY's
    order; a field nvidia-smi cannot read ([N/A]) is left out of its statistics, never read as 0."""
    assert sampler_argv(500)[-2:] == ["-lms", "500"] and sampler_argv()[1].count(",") == len(TELEMETRY) - 1
    rows = {"n1": [["2026/12/01 10:00:00.000", "0", "GPU-a", "1980", "3201", "410.5", "54", "97", "120000"],
                   ["2026/12/01 10:00:01.000", "0", "GPU-a", "1755", "3201", "[N/A]", "58", "99", "120100"],
                   ["2026/12/01 10:00:00.000", "1", "GPU-b", "345", "3201", "75.2", "31", "0", "512"]]}
    out = summarize(rows, 1.0)
    a, b = out["gpus"]
    assert (a["uuid"], a["samples"], b["uuid"], b["samples"]) == ("GPU-a", 2, "GPU-b", 1)
    assert a["sm_clock_mhz"] == {"mean": pytest.approx(1867.5), "min": 1755.0, "max": 1980.0}
    assert a["power_w"] == {"mean": 410.5, "min": 410.5, "max": 410.5}                     # the N/A sample left out
    assert b["utilization_pct"]["max"] == 0.0


def h200(phase: str, telemetry: bool = True) -> object:
    """A real result of this machine with the lent H200's record and telemetry in place of its own (as a point on
    that machine stores them: the record as machine_info.py printed it, the sampler's CSV through the suite's reader)."""
    data = upgrade(json.loads(OLD.read_text()))
    data["machine"] = {"nodes": [{"node": "h200", "rank": 0, **json.loads((H200 / phase / "machine.json").read_text())}],
                       "extra": {}}
    data["telemetry"] = summarize({"h200": read_samples(H200 / phase / "telemetry.csv")}, 1.0) if telemetry else None
    return parse(data)


def test_the_lent_h200s_record_and_telemetry_read_as_a_point_stores_them():
    """Recorded on the lent H200 by scripts/gpu-machine-record (tests/data/h200-machine/README.md): under a matmul
    load the GPU sits at its 700 W limit with its SM clock well below the 1980 MHz its record names."""
    r = h200("alone")
    (node,) = r.machine.nodes
    (g,) = node.gpus
    assert (g.name, g.driver, g.cuda, g.power_limit_w, g.max_sm_clock_mhz) == ("NVIDIA H200", "580.159.04", "13.0",
                                                                               700.0, 1980.0)
    assert node.gpu_processes == [] and node.problems == [] and node.cores_usable == 16
    (t,) = r.telemetry.gpus
    assert t.uuid == g.uuid and t.samples >= 30
    assert t.power_w.max > 0.95 * g.power_limit_w and t.sm_clock_mhz.min < 400 and t.utilization_pct.max >= 98
    loaded = [row for row in read_samples(H200 / "alone/telemetry.csv") if float(row[7]) >= 95]
    assert len(loaded) >= 25 and max(float(row[3]) for row in loaded) < 0.8 * g.max_sm_clock_mhz   # power-capped


def test_compare_names_the_other_tenant_on_the_lent_h200():
    """The same load beside a second process on the GPU ran at less than half the rate; the records of the two
    conditions differ in exactly that process, and compare names it."""
    lines = machines.differences([h200("alone")], [h200("shared", telemetry=False)])
    assert "GPU processes before the servers: none -> /opt/torch/.venv/bin/python3 (31,722 MiB)" in lines, lines
    assert not any(line.startswith(("GPU0 model", "GPU0 UUID", "GPU0 driver", "GPU0 power", "host", "CPU"))
                   for line in lines), lines
    alone, shared = (json.loads((H200 / p / "load.json").read_text())["tflops"] for p in ("alone", "shared"))
    assert shared < 0.6 * alone


@pytest.mark.parametrize("case", ["llama-770m-h200-vllm-c8", "llama-770m-h200-vllm-c32"])
def test_an_h200_point_stores_its_machine_and_what_the_gpu_did(case):
    """Two rackbench points measured on the lent H200 (tests/data/h200-point-record), schema-valid, each with the
    machine record and the nvidia-smi summary of its window: what the earlier H200 runs lacked to say why their
    throughput differed. Here the GPU was not the limit: full SM clock, a quarter of the power cap, idle most of
    the time, no other process on it."""
    path = H200_POINTS / f"{case}.json"
    assert file_problems(path) == []
    r = parse(json.loads(path.read_text()))
    assert r.verdict.passed and r.requests.errors == 0
    (node,) = r.machine.nodes
    (g,) = node.gpus
    assert g.name == "NVIDIA H200" and g.power_limit_w == 700.0 and node.gpu_processes == [] and node.problems == []
    (t,) = r.telemetry.gpus
    assert t.uuid == g.uuid and t.samples >= 45                                 # ~one a second over the point
    assert t.sm_clock_mhz.mean > 0.95 * g.max_sm_clock_mhz and t.power_w.max < 0.5 * g.power_limit_w
    assert t.utilization_pct.mean < 25
    # against the repository's H200 noise run of the same profile, which recorded no machine: compare says so
    old = parse(json.loads((NOISE_H200 / f"{case}.json").read_text()))
    lines = machines.differences([old], [r])
    assert lines[0].startswith("machine record: none") and "GPU0 model: — -> NVIDIA H200" in lines


def with_host(r, engine_cores: float, bound: str, load: float = 1.0):
    """A result with a host record (rackbench.server.host) and a bound (rackbench.results.bound)."""
    from rackbench.results.model import PointResult
    return PointResult.model_validate({**r.model_dump(mode="json"),
        "host": {"source": "test", "interval_s": 1.0,
                 "nodes": [{"node": "local0", "samples": 40, "cores": 16, "load_mean": load, "load_max": load,
                            "cpu_mhz_mean": 2600.0}],
                 "processes": [{"node": "local0", "name": "VLLM::EngineCore", "pid": 10, "role": "server",
                                "cores_mean": engine_cores, "cores_max": engine_cores},
                               {"node": "local0", "name": "aiperf", "pid": 11, "role": "client",
                                "cores_mean": 0.3, "cores_max": 0.5}],
                 "hottest": {"name": "VLLM::EngineCore", "node": "local0", "cores": engine_cores}},
        "bound": {"bound": bound, "reason": "test", "evidence": {}}})  # noqa: E128


def test_compare_names_a_host_side_difference_as_it_names_a_gpu_one():
    """#34 item 3: the engine's CPU, the hosts' load and what bound the points, beside the GPU lines."""
    a = [with_host(result(gpu(), 1980.0), 0.45, "gpu")]
    b = [with_host(result(gpu(), 1980.0), 0.98, "host", load=3.0)]
    lines = machines.differences(a, b)
    assert "CPU of VLLM::EngineCore (server) during the points: 0.45 cores -> 0.98 cores" in lines
    assert "host load average during the points (mean): 1.00 -> 3.00" in lines
    assert "what bound the points: gpu -> host" in lines
    assert not any("aiperf" in line or "SM clock" in line for line in lines)           # what did not change
    assert machines.differences(a, [with_host(result(gpu(), 1980.0), 0.47, "gpu")]) == []                  # 0.02 cores: within the gap, no line
