"""Sample this host's CPU use by the processes of one point (#34), run as a step on each host beside the GPU sampler.

    python host_sampler.py TOKEN INTERVAL_MS SERVER_VAR CLIENT_VAR

Every INTERVAL_MS it prints one JSON line: the wall clock, the 1-minute load average, the mean CPU clock (MHz, from
/proc/cpuinfo) and, for every process whose environment carries TOKEN as SERVER_VAR (the deployment's servers;
rackbench.server.identity names the variables) or as CLIENT_VAR (the load generator), and every process they started (engine cores, workers: found
by their parents, since a process that retitles itself, as vLLM's VLLM::EngineCore does with setproctitle, writes
its title over its environment), its name, its role and its CPU time so far in clock ticks (utime + stime of
/proc/PID/stat). Until it is stopped (SIGTERM). Standard library only: it runs with any interpreter a node has, in any image.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

def role_of(pid: str, token: bytes, roles: dict[bytes, str]) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for name, role in roles.items():
        if name + b"=" + token in env:
            return role
    return None


def name_of(pid: str) -> str:
    """A process's title (vLLM names its engine VLLM::EngineCore) or its program, with the module a Python runs."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    if not argv:
        return "?"
    prog = os.path.basename(argv[0].split()[0]) if argv[0] else "?"
    if prog.startswith("python") and len(argv) > 1:
        rest = argv[2] if argv[1] == "-m" and len(argv) > 2 else os.path.basename(argv[1])
        return f"{prog} {rest}"
    return argv[0] if "::" in argv[0] else prog


def stat_of(pid: str) -> tuple[str, int] | None:
    """(parent pid, CPU ticks so far) of a process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[1], int(fields[11]) + int(fields[12])      # ppid, utime + stime (fields 4, 14, 15 of proc(5))


def mhz() -> float | None:
    try:
        with open("/proc/cpuinfo") as f:
            clocks = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
    except (OSError, ValueError):
        return None
    return sum(clocks) / len(clocks) if clocks else None


def main() -> None:
    token, interval = sys.argv[1].encode(), int(sys.argv[2]) / 1000
    roles = {sys.argv[3].encode(): "server", sys.argv[4].encode(): "client"}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    known: dict[str, tuple[str, str] | None] = {}         # pid -> (role, name), or None: not this point's
    print(json.dumps({"hz": os.sysconf("SC_CLK_TCK"), "cores": os.cpu_count()}), flush=True)
    while True:
        stats = {pid: st for pid in os.listdir("/proc") if pid.isdigit() and (st := stat_of(pid)) is not None}
        for pid in sorted(stats, key=int):           # a parent's pid is (almost always) lower than its child's
            if pid not in known:
                role = role_of(pid, token, roles) or (known.get(stats[pid][0]) or (None,))[0]
                known[pid] = (role, name_of(pid)) if role else None
            elif known[pid] is not None:      # named again: a spawned engine core retitles itself after it is first seen
                known[pid] = (known[pid][0], name_of(pid))
        procs = {pid: [known[pid][1], known[pid][0], stats[pid][1]] for pid in stats if known.get(pid)}
        print(json.dumps({"t": time.time(), "load": os.getloadavg()[0], "mhz": mhz(), "procs": procs}), flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    main()
