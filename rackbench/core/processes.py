"""Processes rackbench starts: each leads its own process group, and stopping it stops the whole group.

A server's leader may be gone while what it started lives on (vLLM's API server killed, its ``EngineCore`` and
workers still holding memory and ports): the group is signalled whether or not its leader is alive, and the
stop waits until no member is left.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess

from rackbench.core.poll import Done, PollTimeout, poll

log = logging.getLogger(__name__)


def group_alive(pgid: int) -> bool:
    """Whether any process is still in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # a member we may not signal still exists
        return True
    return True


def stop_group(popen: subprocess.Popen, grace: float = 10.0, kill_wait: float = 5.0) -> bool:
    """TERM the process group ``popen`` leads, KILL what is left after ``grace`` seconds; True when no member
    is left. The leader is reaped on the way (a zombie leader would keep the group alive)."""
    return stop_groups([popen.pid], grace, kill_wait, reap=popen.poll)


def stop_groups(pgids: list[int], grace: float = 10.0, kill_wait: float = 5.0, reap=lambda: None) -> bool:
    """TERM each process group, KILL what is left after ``grace`` seconds; True when no member of any is left.
    ``reap`` is called before each look (a leader this process started must be reaped to leave its group)."""
    def alive() -> list[int]:
        reap()
        return [g for g in pgids if group_alive(g)]

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        left = alive()
        if not left:
            return True
        for pgid in left:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        try:
            poll(lambda: Done(True) if not alive() else "members left", timeout=wait, interval=0.05, backoff=1.5,
                 max_interval=1.0, what=f"process group(s) {', '.join(map(str, left))}")
            return True
        except PollTimeout:
            log.debug("process group(s) %s still have members %.0f s after %s", left, wait, sig.name)
    return not alive()
