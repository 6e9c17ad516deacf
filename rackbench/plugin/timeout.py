"""A pytest ``--timeout`` (pytest-timeout) that fires inside a point: one line that says so, and the point kept as
interrupted, never as a measurement.

pytest-timeout's own signal handler prints every thread's stack and then fails the test with a traceback through
the fixtures' source (159 lines for one point), and its exception is no ``KeyboardInterrupt``, so the cut point
was stored as a measurement and entered the history (#54). For the cases that measure a point (those that ask for
``sb_point`` or ``sb_search_case``) this plugin takes the timer over through pytest-timeout's own hooks
(``pytest_timeout_set_timer`` / ``pytest_timeout_cancel_timer``, signal method only): the alarm fails the case with
one line, without a traceback; the measurement underway sees an interruption (rackbench.load.measure marks every
non-``Exception`` so) and keeps its partial result out of the history. Other tests keep pytest-timeout's handling.
"""

from __future__ import annotations

import signal

import pytest

TIMED_OUT = pytest.StashKey[str]()          # the one line, on a case whose timer fired
OURS = pytest.StashKey[bool]()              # the case's timer is this plugin's
POINT_FIXTURES = ("sb_point", "sb_search_case")


def _ours(item: pytest.Item, settings) -> bool:
    return getattr(settings, "method", None) == "signal" and hasattr(signal, "SIGALRM") and \
        any(f in getattr(item, "fixturenames", ()) for f in POINT_FIXTURES)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings):
    if not _ours(item, settings):
        return None
    said = (f"{item.name}: pytest --timeout {settings.timeout:g} s ran out during the case: not a measurement (what "
            "it measured is kept in its case folder, marked interrupted, and kept out of the history)")

    def alarm(signum, frame):
        __tracebackhide__ = True
        item.stash[TIMED_OUT] = said
        pytest.fail(said, pytrace=False)
    item.stash[OURS] = True
    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item):
    if not item.stash.get(OURS, False):
        return None
    item.stash[OURS] = False
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    return True
