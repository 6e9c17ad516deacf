"""A point's progress line: which phase the run is in, each with its own clock (pure: the caller feeds the elapsed
time and the engines' request count)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Phases:
    """start-up (the generator loads its dataset and primes the sessions: no request done yet), warm-up (until
    ``warmup`` requests are done), profiling (its own clock against ``duration_s``), grace (past the measured
    duration: in-flight requests finish)."""

    duration_s: float
    warmup: int
    _first_done: float | None = field(default=None, init=False)
    _profiling_from: float | None = field(default=None, init=False)

    def observe(self, at: float, done: float) -> None:
        """A count of requests done ``at`` seconds in (the series' samples, every slice: finer than the line)."""
        if done > 0 and self._first_done is None:
            self._first_done = at
        if done >= self.warmup and self._profiling_from is None and self._first_done is not None:
            self._profiling_from = at

    def line(self, elapsed: float, done: float | None) -> str:
        if done is None:
            return f"{elapsed:.0f} s in, requests unknown (the engines' counters do not answer)"
        self.observe(elapsed, done)
        if self._first_done is None:
            return f"start-up {elapsed:.0f} s (the load generator loads its dataset; no request done yet)"
        if self._profiling_from is None:
            return f"warm-up {max(0.0, elapsed - self._first_done):.0f} s, {done:.0f} of {self.warmup} warm-up " \
                   "requests done"
        # the phases are seen on the sampler's clock, which can run a scrape ahead of the caller's: never below 0
        at = max(0.0, elapsed - self._profiling_from)
        if at <= self.duration_s:
            return f"profiling {at:.0f} s of ~{self.duration_s:.0f} s, {done:.0f} requests done"
        return f"grace {at - self.duration_s:.0f} s past the measured {self.duration_s:.0f} s (in-flight requests " \
               f"finish), {done:.0f} requests done"
