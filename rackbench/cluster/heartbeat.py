"""A held job that outlives its session ends by itself: the session rewrites a heartbeat file in the profile folder
(which the nodes see: the job's output goes there) every ``orphan_after_s / 6`` seconds, and the holder job ends once
the file has not changed for ``orphan_after_s`` by the node's own clock (a change is what counts, not the file's
time, so a login node and a compute node whose clocks differ do not matter). Slurm then ends every step of the job.

A session killed with SIGKILL, a lost login shell or CI runner, an OOM kill: the job is gone within
``orphan_after_s`` + one check + Slurm's KillWait, instead of at the job's time limit.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from pathlib import Path

from rackbench.core.files import write_atomic

log = logging.getLogger(__name__)
DEFAULT_ORPHAN_AFTER_S = 180


def interval(orphan_after_s: float) -> float:
    return max(1.0, orphan_after_s / 6)


def holder_lines(heartbeat: Path, orphan_after_s: int) -> list[str]:
    """The batch script's body: check the heartbeat, end the job (exit 3) when it has stopped; exit 4 at once when
    the node cannot see it (the session writes it before it submits the job, so the results folder is not on storage
    the nodes share). Fixed text, bash builtins and `sleep` only; the path is quoted, the numbers are the cluster
    file's validated integers."""
    every = max(1, int(interval(orphan_after_s)))
    return [f"hb={shlex.quote(str(heartbeat))}", f"limit={int(orphan_after_s)}", f"every={every}",
            'if [ ! -e "$hb" ]; then',
            '  echo "rackbench: the session\'s heartbeat $hb is not visible on this node: the results folder must be'
            ' on storage the nodes share with the login node; ending the job"',
            '  exit 4',
            'fi',
            'last=""; seen=$SECONDS',
            'while sleep "$every"; do',
            '  { read -r cur < "$hb"; } 2>/dev/null || cur=""',
            '  if [ -n "$cur" ] && [ "$cur" != "$last" ]; then last=$cur; seen=$SECONDS; fi',
            '  if [ $((SECONDS - seen)) -ge "$limit" ]; then',
            '    echo "rackbench: no heartbeat from the session for $((SECONDS - seen)) s (limit $limit s, $hb):'
            ' ending the job and its steps"',
            '    exit 3',
            '  fi',
            'done']


class Heartbeat:
    """Rewrites the heartbeat file (a counter and the time) from a daemon thread until stopped."""

    def __init__(self, path: Path, orphan_after_s: float):
        self.path, self.every = Path(path), interval(orphan_after_s)
        self._stop = threading.Event()
        self._beats = 0
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat {self.path.name}", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        self._beats += 1
        try:
            write_atomic(self.path, f"{self._beats} {time.time():.0f}\n")
        except OSError as err:          # a full disk must not stop the session; the job may then end early
            log.warning("heartbeat not written: %s", err)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.beat()

    def stop(self) -> None:
        self._stop.set()
