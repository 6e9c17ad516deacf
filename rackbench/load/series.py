"""A point's series over time: the engines' counters scraped every slice while the load generator runs (output and
prompt tokens, requests, running and waiting, KV-cache usage, prefix-cache and CPU-tier shares), and the
generator's own records per slice (requests completed, their TTFT). The counters feed the live stopping rule
(rackbench.load.stopping); both are kept with the point (the result's ``series``).
"""

from __future__ import annotations

import bisect
import logging
import statistics
import threading
import time
from dataclasses import dataclass

from rackbench.load.records import Request
from rackbench.server.counters import Snapshot
from rackbench.server.deploy import Deployment, ServerError, http_client

log = logging.getLogger(__name__)
SLICE_S = 5.0


@dataclass(frozen=True)
class Sample:
    t: float              # seconds since the generator started, when the scrape's answer came (see _take)
    snap: Snapshot


class CounterSampler:
    """Scrapes the deployment's counters every ``slice_s`` in a thread of its own, from start() to stop()."""

    def __init__(self, dep: Deployment, slice_s: float = SLICE_S):
        self.dep, self.slice_s = dep, slice_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="rackbench-series", daemon=True)
        self.t0 = 0.0
        self._client = None

    def start(self) -> "CounterSampler":
        self._client = http_client()          # one for the run: a scrape each slice, not a client each
        self.t0 = time.monotonic()
        self._take()
        self._thread.start()
        return self

    def _take(self) -> None:
        try:
            snap = self.dep.counters(self._client)
        except (ServerError, Exception) as err:  # noqa: BLE001 - a missed scrape is a gap, not a failed point
            log.debug("series scrape failed: %s", err)
            return
        # Stamped when the answer came, not when the request went out: a server renders its counters as it answers,
        # and a busy one answers late (vLLM's CPU server on 2 cores: 0.1 s at the median, up to 5 s), having counted
        # every token it emitted meanwhile; stamped at the request, that wait's tokens fell in the wrong slice.
        t = time.monotonic() - self.t0
        with self._lock:
            self.samples.append(Sample(t, snap))

    def _loop(self) -> None:
        k = 1
        while not self._stop.wait(max(0.0, self.t0 + k * self.slice_s - time.monotonic())):
            self._take()
            # a late answer skips the ticks it overran: no burst of back-to-back scrapes to catch up
            k = max(k + 1, int((time.monotonic() - self.t0) / self.slice_s) + 1)

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._take()
        self._client.close()
        return self.snapshot()

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)


def token_rates(samples: list[Sample], slice_s: float) -> list[float]:
    """Output tokens per second in each ``slice_s`` from the first sample to the last: the engines' cumulative
    generation counter read at the scrapes' times and linearly interpolated between them onto a regular grid (as
    Prometheus's ``rate()`` treats a counter between scrapes), so that every value covers the same time, as the
    steady-state analysis assumes (rackbench.load.steady). A scrape answered late shares its tokens out over the
    slices it spanned instead of making one slice of several times the rate and a run of empty ones."""
    times = [s.t for s in samples]
    tokens = [s.snap.generation_tokens for s in samples]
    if len(times) < 2 or times[-1] <= times[0]:
        return []

    def at(t: float) -> float:
        i = bisect.bisect_left(times, t)
        if i >= len(times):
            return tokens[-1]
        if i == 0 or times[i] == t:
            return tokens[i]
        return tokens[i - 1] + (tokens[i] - tokens[i - 1]) * (t - times[i - 1]) / (times[i] - times[i - 1])
    grid = [at(times[0] + k * slice_s) for k in range(int((times[-1] - times[0]) / slice_s + 1e-9) + 1)]
    return [(b - a) / slice_s for a, b in zip(grid, grid[1:])]


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def counter_series(samples: list[Sample]) -> dict:
    """Per slice (between consecutive scrapes): its end time and the counters' rates and shares."""
    out: dict[str, list] = {k: [] for k in ("t", "output_tps", "prompt_tps", "requests", "running", "waiting",
                                            "kv_usage", "prefix_hit_share", "cpu_tier_share")}
    for a, b in zip(samples, samples[1:]):
        dt = b.t - a.t
        if dt <= 0:
            continue
        d = b.snap - a.snap
        by_source = d.prompt_tokens_local_cache_hit + d.prompt_tokens_external + d.prompt_tokens_local_compute
        out["t"].append(round(b.t, 3))
        out["output_tps"].append(d.generation_tokens / dt)
        out["prompt_tps"].append(d.prompt_tokens / dt)
        out["requests"].append(d.requests_succeeded)
        out["running"].append(b.snap.running)
        out["waiting"].append(b.snap.waiting)
        out["kv_usage"].append(b.snap.kv_cache_usage)
        out["prefix_hit_share"].append(_share(d.prompt_tokens_local_cache_hit, by_source))
        out["cpu_tier_share"].append(_share(d.prompt_tokens_external, by_source))
    return out


def record_series(requests: list[Request], t0: float, slice_s: float, slices: int) -> dict:
    """Per slice of the generator's run (``t0``: its start, wall clock): requests completed and their TTFT p50."""
    done: list[list[Request]] = [[] for _ in range(slices)]
    for r in requests:
        if r.end_s is None or not r.ok:
            continue
        i = int((r.end_s - t0) // slice_s)
        if 0 <= i < slices:
            done[i].append(r)
    ttft = [[r.ttft_ms for r in d if r.ttft_ms is not None] for d in done]
    return {"completed": [len(d) for d in done],
            "ttft_p50_ms": [statistics.median(x) if x else None for x in ttft]}


def client_open(requests: list[Request], t0: float, ends: list[float], until: float | None = None,
                unanswered: int = 0) -> list[int | None]:
    """Per slice (``ends``: each slice's end, seconds since the generator started at wall clock ``t0``; the first
    begins at 0, where the sampler took its first scrape): how many
    of the generator's requests were open for the whole slice, by its own records (sent before the slice began,
    answered after it ended, or never). None outside the measured window (before the first request was sent,
    after the last was answered, or, where the generator says when its measured phase ended (``until``, on the same
    clock), after that): the generator's start-up and wind-down are no stall. ``unanswered``: requests the generator
    gave up on at its grace's end, which no record holds; they count as open from the last answer to ``until``."""
    spans = [(r.start_s - t0, (r.end_s - t0) if r.end_s is not None else float("inf"))
             for r in requests if r.start_s is not None]
    if not spans:
        return [None] * len(ends)
    first, answered = min(s for s, _ in spans), max(e for _, e in spans)
    last = max(answered, until) if until is not None else answered
    out: list[int | None] = []
    for i, end in enumerate(ends):
        start = ends[i - 1] if i else 0.0
        held = sum(1 for s, e in spans if s <= start and e >= end) + (unanswered if start >= answered else 0)
        out.append(held if start >= first and end <= last else None)
    return out


@dataclass(frozen=True)
class Stall:
    """The longest stretch of consecutive slices of one kind in which the engines' token counters did not move:
    ``server`` (it had requests running or waiting: a stopped or hung engine) or ``load`` (it had none, inside the
    measured window: the generator sent nothing, or held a request the server was no longer running)."""

    kind: str
    from_s: float
    to_s: float
    in_flight: float          # the server's running + waiting (server), or the client's open requests (load)

    @property
    def seconds(self) -> float:
        return self.to_s - self.from_s


def stalls(t: list[float], output_tps: list[float], prompt_tps: list[float], running: list[float],
           waiting: list[float], open_: list[int | None]) -> list[Stall]:
    """The longest stall of each kind (rackbench.results.verdict fails a point whose stall outlasts
    profile.gates.max_stall_s). A slice without progress is one whose output and prompt token rates are both 0;
    with requests at the server it is the server's stall, with none (inside the window, ``open_`` not None) the
    load's. Think time between turns is a ``load`` stretch too: a trace whose sessions all think longer than the
    bound at once needs a larger bound."""
    longest: dict[str, Stall] = {}
    run: Stall | None = None
    for i, end in enumerate(t):
        start = t[i - 1] if i else 0.0
        still = output_tps[i] <= 0 and prompt_tps[i] <= 0
        busy = running[i] + waiting[i]
        kind = None if not still else "server" if busy > 0 else "load" if open_[i] is not None else None
        if kind is None:
            run = None
            continue
        here = busy if kind == "server" else open_[i]
        run = (Stall(kind, run.from_s, end, max(run.in_flight, here)) if run is not None and run.kind == kind
               and run.to_s == start else Stall(kind, start, end, here))
        if run.seconds > longest.get(kind, Stall(kind, 0, 0, 0)).seconds:
            longest[kind] = run
    return sorted(longest.values(), key=lambda s: -s.seconds)
