"""What a load generator measured, in its own words translated once: every request it sent and its own summary of
the measured window. A generator's reader (AIPerf's: rackbench.load.aiperf.records) is the only code that knows
its file format; results, the history and comparisons read these types, and a stored point keeps its requests in
rackbench's own file of them (rackbench.results.requests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

STATS = ("avg", "p50", "p90", "p99")
# What a generator's summary may report, by rackbench's name. Distributions carry STATS; the rest only "avg".
SUMMARY = ("duration_s", "successful", "errors", "completed", "requests_per_s", "input_tps", "output_tps",
           "total_tps", "tps_per_user", "ttft_ms", "itl_ms", "e2e_ms", "effective_concurrency", "issue_latency_ms")


@dataclass(frozen=True)
class Request:
    """One request the generator sent."""

    phase: str                       # "warmup" | "profiling"
    ok: bool
    error: dict | None = None        # {"code", "type", "message"} of a failed request
    start_s: float | None = None     # wall clock, seconds since the epoch
    end_s: float | None = None
    credit_s: float | None = None    # when its schedule let it go (think time after the previous turn)
    ttft_ms: float | None = None
    latency_ms: float | None = None
    output_tokens: float | None = None
    input_tokens: float | None = None
    session: str | None = None
    turn: int | None = None

    @property
    def profiled(self) -> bool:
        return self.phase == "profiling"


@dataclass(frozen=True)
class LoadRecords:
    """A run's requests and the generator's summary of its measured (profiling) window."""

    generator: str
    requests: tuple[Request, ...] = ()
    summary: dict[str, dict[str, float | None]] = field(default_factory=dict)
    summary_present: bool = False
    version: str | None = None
    cancelled: bool | None = None     # the generator stopped early (its own live error gate)
    complete: bool | None = None
    problems: tuple[str, ...] = ()    # files that were torn or unreadable, one line each
    # The measured phase as the generator held it (wall clock, seconds since the epoch): from its start to the end of
    # its grace for the requests in flight, answered or not. None where the generator does not say.
    window: tuple[float, float] | None = None
    # Requests sent in the measured phase and never answered: the generator gave up on them at its grace's end (they
    # are in no per-request record). None where the generator does not say.
    unanswered: int | None = None

    def stat(self, name: str, stat: str = "avg") -> float | None:
        value = self.summary.get(name, {}).get(stat)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    def dist(self, name: str) -> dict[str, float | None]:
        return {s: self.stat(name, s) for s in STATS}

    @property
    def profiled(self) -> list[Request]:
        return [r for r in self.requests if r.profiled]

    @property
    def warmup(self) -> list[Request]:
        return [r for r in self.requests if r.phase == "warmup"]


def busy_fraction(requests: list[Request]) -> float | None:
    """How much of a session's time the trace lets it have a request in flight: mean e2e / (mean e2e + mean think
    gap), the gap being from one turn's response to the next turn's credit (the trace's delay as replayed). With
    think time between turns, N sessions keep only N x this fraction in flight however fast the client is."""
    e2e = [r.end_s - r.start_s for r in requests if r.start_s is not None and r.end_s is not None]
    if not e2e:
        return None
    turns: dict[str, list[Request]] = {}
    for r in requests:
        if r.start_s is not None and r.end_s is not None:
            turns.setdefault(str(r.session), []).append(r)
    gaps = []
    for session in turns.values():
        session.sort(key=lambda r: r.turn or 0)
        for prev, nxt in zip(session, session[1:]):
            if nxt.credit_s is not None:
                gaps.append(max(0.0, nxt.credit_s - prev.end_s))
    busy = sum(e2e) / len(e2e)
    think = sum(gaps) / len(gaps) if gaps else 0.0
    return busy / (busy + think) if busy + think > 0 else None
