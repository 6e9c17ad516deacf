"""GPU-hours of a session: each allocation's held time x its GPUs, split by what it went to (offline)."""

import json
from datetime import datetime, timezone

import pytest

from rackbench.report import gpuhours
from rackbench.results.accounting import PHASES, session
from rackbench.results.model import parse, upgrade
from tests.conftest import REPO

OLD = REPO / "tests/data/results-local/points/tiny-llama-cpu-vllm-c1.json"
T0 = 1_780_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def point(start: float, end: float, idle: float, measured: float, mode="fixed", stopped=None, planned=600.0):
    data = upgrade(json.loads(OLD.read_text()))
    data["identity"].update(profile="p", started_at=iso(start), finished_at=iso(end))
    data["run"].update(idle_wait_s=idle, mode=mode, stopped_at_s=stopped, planned_s=planned)
    data["throughput"]["duration_s"] = measured
    return parse(data)


def test_held_time_is_split_by_phase_and_adds_up():
    """16 GPUs: 10 min in the queue, 50 min of model load, two points (idle wait, warm-up, measuring), the nodes
    given back 2 min after the last point; the phases add up to the held time, and an adaptive point that stopped
    at 200 s of a planned 600 s saved 400 s x 16 GPUs."""
    manifest = {"allocations": [{"profile": "p", "requested_at": T0, "allocated_at": T0 + 600,
                                 "released_at": T0 + 4600 + 120}],
                "server_starts": [{"profile": "p", "started_at": T0 + 3600}]}
    pts = [point(T0 + 3600, T0 + 4300, 20, 600),                               # 80 s warm-up around 600 s
           point(T0 + 4300, T0 + 4600, 10, 200, mode="adaptive", stopped=230)]  # stopped early
    (held,), total = session(manifest, pts, {"p": 16})
    s = held.seconds
    assert (s["queue"], s["model_load"], s["idle_wait"], s["measuring"]) == (600, 3000, 30, 800)
    assert s["warmup"] == pytest.approx(700 - 20 - 600 + 300 - 10 - 200)
    assert s["release"] == pytest.approx(120)
    assert sum(s.values()) == pytest.approx(4720)                             # requested -> released
    assert held.gpu_hours == pytest.approx(4720 * 16 / 3600)
    assert held.saved_gpu_s == pytest.approx(400 * 16)
    assert total.gpu_hours == held.gpu_hours and set(s) == set(PHASES)
    text = gpuhours.markdown([held], total)
    assert "| p | 16 | 21.0 |" in text and text.rstrip().endswith("| 1.8 |")      # 400 s x 16 GPUs = 1.8 GPU-h
    assert gpuhours.line(total).startswith("GPU-hours held: 21.0 (queue 2.7, model load 13.3, idle wait 0.1, ")
    assert gpuhours.properties(total)["gpu_hours_saved"] == pytest.approx(1.7778, abs=1e-3)


def test_a_search_says_what_its_allocation_held_beside_what_its_probes_measured():
    """#32: the GPU-hours a search's one allocation held in all (queue, model load, warm-up, idle waits), per profile
    from the session's manifest, beside the measured windows its probes summed."""
    from rackbench.report.gpuhours import by_profile
    from rackbench.report.slo import searches_section
    manifest = {"allocations": [{"profile": "p", "requested_at": T0, "allocated_at": T0 + 600,
                                 "released_at": T0 + 4600 + 120},
                                {"profile": "p#2", "requested_at": T0 + 5000, "allocated_at": T0 + 5000,
                                 "released_at": T0 + 5360}],
                "server_starts": [{"profile": "p", "started_at": T0 + 3600}]}
    pts = [point(T0 + 3600, T0 + 4300, 20, 600), point(T0 + 4300, T0 + 4600, 10, 200)]
    allocations, _ = session(manifest, pts, {"p": 16})
    held = by_profile(allocations)
    assert list(held) == ["p"] and held["p"].gpu_hours == pytest.approx((4720 + 360) * 16 / 3600)
    answer = {"profile": "p", "tier": "t", "limits": {"ttft_ms": 100.0}, "target": 0.9, "answer": 4,
              "bracket": [4, 8], "why": "test", "cliff": None, "gpu_hours_measured": 3.56, "energy_j": None,
              "probes": []}
    text = searches_section([answer], {}, held)
    assert "It measured 3.6 GPU-hours. Its allocation held 22.6 GPU-hours in all" in text
    assert "3.6 of them measuring" in text and "held" not in searches_section([answer], {})
