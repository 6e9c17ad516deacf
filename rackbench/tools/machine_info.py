#!/usr/bin/env python3
"""What a node is, printed as one JSON line: host, kernel, CPU, cores, memory, load, and each GPU nvidia-smi lists
(model, UUID, driver, CUDA, power limit, maximum clocks, memory) with the processes already on them. Run on every
node of a deployment before its points (rackbench.server.machine), so a result can say on what it was measured.
Stand-alone on purpose: it runs with the node's interpreter (an image), where rackbench is not installed.
"""

import json
import os
import platform
import re
import shutil
import socket
import subprocess

GPU_FIELDS = ("index", "name", "uuid", "driver_version", "power.limit", "power.max_limit", "clocks.max.sm",
              "clocks.max.mem", "memory.total", "pci.bus_id", "persistence_mode", "compute_mode")
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def _query(args: list[str]) -> list[list[str]]:
    out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise RuntimeError((out.stderr or out.stdout).strip().splitlines()[-1] if (out.stderr or out.stdout).strip()
                           else f"nvidia-smi exited {out.returncode}")
    return [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def gpus(problems: list) -> tuple[list[dict], list[dict]]:
    if shutil.which("nvidia-smi") is None:
        problems.append("no nvidia-smi on this node: no GPU record, no telemetry")
        return [], []
    try:
        rows = _query([f"--query-gpu={','.join(GPU_FIELDS)}"])
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
        problems.append(f"nvidia-smi failed: {err}")
        return [], []
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    out = []
    for row in rows:
        v = dict(zip(GPU_FIELDS, row))
        out.append({"index": int(v["index"]), "name": v["name"], "uuid": v["uuid"], "driver": v["driver_version"],
                    "cuda": cuda.group(1) if cuda else None, "power_limit_w": _number(v["power.limit"]),
                    "power_max_limit_w": _number(v["power.max_limit"]),
                    "max_sm_clock_mhz": _number(v["clocks.max.sm"]),
                    "max_mem_clock_mhz": _number(v["clocks.max.mem"]), "memory_mib": _number(v["memory.total"]),
                    "pci_bus_id": v["pci.bus_id"], "persistence_mode": v["persistence_mode"],
                    "compute_mode": v["compute_mode"]})
    try:
        apps = [dict(zip(APP_FIELDS, r)) for r in _query([f"--query-compute-apps={','.join(APP_FIELDS)}"])]
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        apps = []
    return out, [{"gpu_uuid": a["gpu_uuid"], "pid": int(a["pid"]) if a["pid"].isdigit() else None,
                  "name": a["process_name"], "memory_mib": _number(a["used_memory"])} for a in apps]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def main() -> None:
    problems: list[str] = []
    found, apps = gpus(problems)
    print(json.dumps({
        "host": socket.gethostname(), "kernel": platform.release(), "cpu": cpu_model(), "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)), "memory_gib": memory_gib(),
        "loadavg": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
        "gpus": found, "gpu_processes": apps, "problems": problems}), flush=True)


if __name__ == "__main__":
    main()
