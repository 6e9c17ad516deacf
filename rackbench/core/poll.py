"""The one polling loop: ask until an answer comes, with a deadline, an interval and backoff.

Every wait in rackbench (readiness, idle engines, a Slurm job starting or ending, a model being generated) goes
through :func:`poll`, so each has a bounded duration, a bounded call rate, and says what it was still waiting for
when it gave up, and while it waits: a listener registered with :func:`listen` (the pytest plugin's status line)
hears each 'not yet' with how long it has waited, so that a long wait is never silent.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PollTimeout(TimeoutError):
    def __init__(self, what: str, waited: float, last: object):
        self.waited, self.last = waited, last
        super().__init__(f"{what}: still waiting after {waited:.0f} s (last: {last})")


_LISTENERS: list[Callable[[str, float, object], None]] = []


def listen(listener: Callable[[str, float, object], None]) -> Callable[[], None]:
    """Call ``listener(what, waited_s, last_answer)`` on each 'not yet' of a wait in the main thread; returns the
    function that stops it."""
    _LISTENERS.append(listener)
    return lambda: _LISTENERS.remove(listener) if listener in _LISTENERS else None


@dataclass(frozen=True)
class Done(Generic[T]):
    """Returned by a probe when the wait is over; any other value is 'not yet' (and is reported on timeout)."""

    value: T


def poll(probe: Callable[[], object], *, timeout: float, interval: float = 1.0, backoff: float = 1.0,
         max_interval: float = 30.0, what: str = "condition", sleep: Callable[[float], None] = time.sleep,
         clock: Callable[[], float] = time.monotonic, heard: bool = True) -> object:
    """Call ``probe`` until it returns :class:`Done` (its value is returned) or ``timeout`` seconds pass
    (:class:`PollTimeout`, carrying the probe's last answer). The interval grows by ``backoff`` after each
    'not yet', up to ``max_interval``; exceptions from the probe propagate (a dead process ends the wait).
    ``heard``: the listeners hear it (False for a wait that reports its own progress)."""
    start = clock()
    wait = interval
    last: object = "nothing polled yet"
    while True:
        answer = probe()
        if isinstance(answer, Done):
            return answer.value
        last = answer
        waited = clock() - start
        if waited >= timeout:
            raise PollTimeout(what, waited, last)
        if heard and _LISTENERS and threading.current_thread() is threading.main_thread():
            for listener in list(_LISTENERS):
                listener(what, waited, answer)
        sleep(min(wait, max(0.0, timeout - waited)))
        wait = min(wait * backoff, max_interval)
