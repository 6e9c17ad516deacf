"""The checks of a point's measured window, to its end: the load generator ran to its own end, every request sent in
the window was answered, nothing stood still and the server never went silent inside it, and a fixed point's trace
lasted its planned length.

The window is the load generator's measured phase up to the end of its grace for the requests in flight
(``run.window``), not the span of the answered requests: a server that freezes in the window's last seconds leaves
its last requests unanswered, and a check that stopped at the last answer passed it (#54). Each failure names the
cause the evidence shows and the fix that fits it.
"""

from __future__ import annotations

import math

from rackbench.core.format import number
from rackbench.load.series import stalls
from rackbench.results.checks.base import Judged, count
from rackbench.results.model import Check, Series, Window


def generator(p: Judged) -> Check | None:
    """The load generator ran to its own end (exit code 0), or rackbench stopped it (the adaptive rule), or it
    aborted on the live error gate (that check says so): None. A generator killed or crashed mid-point left records
    that look like a short run, and such a point passed (#35): a failed check saying how it ended."""
    run = p.result.run
    if run.exit_code == 0 or run.stopped_at_s is not None or run.was_cancelled or run.interrupted:
        return None
    how = ("did not run to an end" if run.exit_code is None else
           f"was killed by signal {-run.exit_code}" if run.exit_code < 0 else f"exited with code {run.exit_code}")
    return Check(name="generator", ok=False, message=(
        f"{run.generator} {how} during the point: what it wrote is not a measurement of the window (its log: "
        f"{run.artifact_dir}/logs)"))


def _after_last_answer(s: Series, w: Window) -> list[int]:
    """The series' slices from the window's last answer to its end, each between two scrapes answered on time (a
    slice across a silence shows what the engine did while the API answered nothing, after it answered again)."""
    since = w.last_answer_s if w.last_answer_s is not None else w.start_s
    return [i for i, end in enumerate(s.t) if (start := s.t[i - 1] if i else 0.0) >= since
            and end <= w.end_s + s.slice_s / 4 and end - start <= 2 * s.slice_s]


def silence(s: Series, w: Window | None) -> tuple[float, float] | None:
    """The longest time between two answered counter scrapes that began inside the window (from, to; the run's
    clock): while it lasted the server's API answered nothing, not even its metrics."""
    if w is None or not s.t:
        return None
    gaps = [(a, b) for a, b in zip([0.0, *s.t], s.t) if w.start_s <= a < w.end_s]
    return max(gaps, key=lambda g: g[1] - g[0], default=None)


def _working(s: Series | None, later: list[int]) -> bool:
    """The server still worked in these slices (the later half of the stretch after the last answer: the first
    scrapes after a stop may still show what came before): a token counter moved, or a gauge changed (a long
    prefill moves no counter, but its chunks fill the KV cache). A gauge that holds still is no work: a stopped
    engine's gauges keep their last values, requests running included (real vLLM under SIGSTOP, 2026-12-06)."""
    if s is None or not later:
        return False
    if any(s.output_tps[i] > 0 or s.prompt_tps[i] > 0 for i in later):
        return True
    gauges = [(s.running[i], s.waiting[i], s.kv_usage[i]) for i in range(max(0, later[0] - 1), later[-1] + 1)]
    return len(set(gauges)) > 1


def answered(p: Judged) -> Check | None:
    """Requests sent in the window and never answered (the generator gave up on them at its grace's end). They count
    as errors (results.build); where the server still produced tokens to the end they are requests longer than the
    grace, said and left to the error gate; where it produced none after the last answer, the server stopped: the
    point fails, saying whether its API went silent or its engine stood still."""
    result = p.result
    n, w, s, gen = result.requests.unanswered, result.run.window, result.series, result.run.generator
    if not n or w is None:
        return None
    said = (f"{n} request{'s' if n != 1 else ''} sent in the measured window {'were' if n != 1 else 'was'} never "
            f"answered: {gen} gave up on them at its grace's end ({number(w.end_s, 's')} s of the run; the last "
            f"answer came at {number(w.last_answer_s, 's', missing='n/a')} s)")
    tail = _after_last_answer(s, w) if s is not None else []
    if _working(s, tail[len(tail) // 2:]):
        return Check(name="answered", ok=True, message=(
            f"{said}; the server still worked on them to the end, so they outlived the grace: counted as errors, "
            "and missing from the latency percentiles (raise profile.load.post_duration_grace_s above the longest "
            "request)"))
    quiet = silence(s, w) if s is not None else None
    if s is None or not tail or (quiet and quiet[1] - quiet[0] > 2 * s.slice_s and quiet[1] >= w.end_s):
        # no scrape answered on time from the last answer on, or a silence that lasted to the window's end
        start = quiet[0] if quiet else w.last_answer_s
        cause = (f"the server's API stopped answering: no counter scrape answered from {number(start, 's')} s "
                 "(a stopped or hung API server)")
    else:
        running = max((s.running[i] + s.waiting[i] for i in tail), default=0)
        cause = (f"the server's token counters stood still from {number(s.t[tail[0] - 1] if tail[0] else 0, 's')} s "
                 f"to the window's end while its API answered them with {number(running, 'count')} running or "
                 f"waiting: its engine stopped or hung (a stopped engine's gauges go still with it), or a "
                 f"{gen} worker that held the requests died (its log: {result.run.artifact_dir}/logs)")
    return Check(name="answered", ok=False, message=f"{said}; {cause}. The point measured a server that stopped "
                 "answering, not its throughput (every server log is kept in the case's server-logs/)")


def stall(p: Judged) -> Check:
    """Nothing stood still inside the measured window, to its end, for longer than profile.gates.max_stall_s: a
    stopped or hung engine holds its requests while its token counters stop (the frozen request counted as no error
    and the point passed, #35); a stopped load generator leaves the server idle, and what it then records is its own
    delay (a 20 s window measured as 73 s); a stopped API server answers no counter scrape at all (no slice to read,
    #54)."""
    result, bound = p.result, p.gates.max_stall_s
    s, gen, limit = result.series, result.run.generator, f"profile.gates.max_stall_s = {number(bound, 's')} s"
    if s is None:
        return Check(name="stall", ok=True, message="not checked: no counter series of the point")
    quiet = silence(s, result.run.window)
    if quiet is not None and quiet[1] - quiet[0] > bound:
        return Check(name="stall", ok=False, message=(
            f"the server answered no counter scrape for {number(quiet[1] - quiet[0], 's')} s (from "
            f"{number(quiet[0], 's')} s to {number(quiet[1], 's')} s of the run), from inside the measured window: "
            f"a stopped or hung API server; the point's numbers include that time ({limit})"))
    found = [st for st in stalls(s.t, s.output_tps, s.prompt_tps, s.running, s.waiting,
                                 s.client_open or [None] * len(s.t)) if st.seconds > bound]
    if not found:
        return Check(name="stall", ok=True, message=f"no stall over {number(bound, 's')} s: the server's token "
                     "counters moved in every stretch of that length inside the measured window")
    st = found[0]
    when = f"{number(st.seconds, 's')} s (from {number(st.from_s, 's')} s to {number(st.to_s, 's')} s of the run)"
    lost = result.requests.unanswered
    what = f"the server's token counters stood still for {when} " + (
        f"with {count(st.in_flight)} requests running or waiting: a stopped or hung engine" if st.kind == "server" else
        f"with no request running or waiting while {gen} held {count(st.in_flight)} open and never got {lost} of "
        "them answered: a stopped or hung engine (its gauges go still with it), or a load-generator worker that held "
        "them died" if st.in_flight and lost else
        f"with no request running or waiting while {gen} held {count(st.in_flight)} open: a stalled load generator "
        "(holding answers it did not read), or an engine stopped before it took them in (its gauges went still too)"
        if st.in_flight else f"with no request anywhere: {gen} sent nothing (a stalled load generator, or think time "
        "longer than the bound)")
    return Check(name="stall", ok=False, message=f"{what}; the point's numbers include that time, so they are not a "
                 f"measurement of the server ({limit})")


RAN_OUT = 0.9          # a fixed point whose requests span less than this share of its planned length ran out


def trace(p: Judged) -> Check | None:
    """A fixed-length point whose trace ran out before its planned length: every request was sent and answered
    early, so its measured phase ended early, on a draining trace (fewer sessions in flight). A phase that lasted
    its length while its answers stopped early is a server that stopped answering (the answered and stall checks),
    not a short trace."""
    result, load = p.result, p.profile.spec.load
    run, span = result.run, result.throughput.duration_s
    if run.window is not None:
        span = run.window.end_s - run.window.start_s
    if run.mode != "fixed" or not run.planned_s or span is None or run.was_cancelled or run.stopped_at_s is not None \
            or span >= RAN_OUT * run.planned_s or result.requests.unanswered or run.exit_code not in (0, None):
        return None
    if load.dataset == "generated":
        spc = load.trace.sessions_per_concurrency
        fix = (f"raise profile.load.trace.sessions_per_concurrency ({spc}) to at least "
               f"{math.ceil(spc * run.planned_s / span * 1.25)}")
    else:
        fix = f"replay a longer trace than {load.dataset} (profile.load.dataset), or shorten load.duration_s"
    return Check(name="trace", ok=False, message=(
        f"the trace ran out: its {count(result.requests.completed)} requests span {span:.0f} s of the planned "
        f"{run.planned_s:.0f} s (load.duration_s), so the point measured a shorter window than planned and its end "
        f"a draining trace; {fix}"))
