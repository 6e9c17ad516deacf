"""The measured window of one point and what is taken over it (rackbench.results.build uses these): the window on
the wall clock (the generator's profiling phase, else its profiled requests' span) and on the run's clock, the GPU
figures and the engines' counters over it, the steady-state analysis of its token rate, and the counters' series.
"""

from __future__ import annotations

from rackbench.load.measure import Measurement, stop_rule
from rackbench.load.series import client_open, counter_series, record_series, token_rates
from rackbench.load.steady import analyse


def telemetry_block(m: Measurement) -> dict | None:
    """The GPU figures over the measured window (what the point's throughput and bound are of), the whole sampling
    span beside them; the span alone where the window is not known."""
    from rackbench.server.machine import in_window, summarize
    w = generator_window(m)
    if m.telemetry is None or w is None or not m.telemetry_rows:
        return m.telemetry
    inside = summarize(in_window(m.telemetry_rows, m.telemetry_started, w), m.telemetry["interval_s"])
    return {**inside, "over": "window", "span_gpus": m.telemetry["gpus"]} if inside["gpus"] else m.telemetry


def window_of(profiled: list) -> tuple[float, float] | None:
    """The measured window on the wall clock: the first profiled request sent to the last one answered."""
    starts = [r.start_s for r in profiled if r.start_s is not None]
    ends = [r.end_s for r in profiled if r.end_s is not None]
    return (min(starts), max(ends)) if starts and ends and max(ends) > min(starts) else None


def generator_window(m: Measurement) -> tuple[float, float] | None:
    """The measured window on the wall clock: the generator's profiling phase where it says (AIPerf's summary), else
    its profiled requests' span. A point its rule stopped early has no summary window (the generator was cancelled),
    and its GPU figures and bound were then taken over the whole sampling span (#56)."""
    return m.records.window or window_of(m.records.profiled)


def window_block(m: Measurement) -> dict | None:
    """The measured phase on the run's clock, as the generator held it (or as its requests span it), and when its
    last answer came."""
    w, t0 = generator_window(m), m.run_started
    if w is None or t0 is None:
        return None
    ends = [r.end_s for r in m.records.profiled if r.end_s is not None]
    return {"start_s": round(w[0] - t0, 3), "end_s": round(w[1] - t0, 3),
            "last_answer_s": round(max(ends) - t0, 3) if ends else None}


def measured_window(m: Measurement) -> tuple:
    """The counters over the measured window: from the scrape at the start of the profiling phase (the first
    profiled request) to the last one; without the series, the scrapes around the whole run (warm-up included)."""
    profiled = [r.start_s for r in m.records.profiled if r.start_s is not None]
    if len(m.samples) >= 2 and profiled and m.run_started is not None:
        start = min(profiled) - m.run_started
        earlier = [s for s in m.samples if s.t <= start] or m.samples[:1]
        return earlier[-1].snap, m.samples[-1].snap, (
            f"engine counters over the measured window ({m.samples[-1].t - earlier[-1].t:.0f} s from the profiling "
            f"phase's start; scraped every {m.samples[1].t - m.samples[0].t:.0f} s)")
    return m.before, m.after, "suite scrape before/after the load generator's run (warmup + profiling)"


def profiled_samples(m: Measurement) -> list:
    """The counters' samples up to the profiling phase's end (its last request's end), as the stopping rule saw
    them (rackbench.load.steady leaves out the idle slices before the generator's first request). A run the rule
    stopped is judged on what the rule saw when it stopped: the requests draining after the stop are no steady
    state, and with them the result could call unknown what the stop reason called stationary."""
    if m.stop_samples and m.stop_samples >= 2:
        return m.samples[:m.stop_samples]          # exactly the samples the rule's last look analysed
    samples = m.samples
    ends = [r.end_s for r in m.records.profiled if r.end_s is not None]
    if not ends or m.run_started is None:
        return samples
    inside = [s for s in samples if s.t <= max(ends) - m.run_started]
    return inside if len(inside) >= 2 else samples


def steady_block(m: Measurement, gpus: int) -> dict | None:
    slice_s = stop_rule(m.point).slice_s                      # the slice the sampler took
    rates = token_rates(profiled_samples(m), slice_s)
    if len(rates) < 2:
        return None
    a = analyse(rates, slice_s).as_dict()
    mean = a.pop("mean")
    return {**a, "source": "the engines' generation tokens per slice, from the first to the profiling phase's end "
                           "(rackbench.load.series)",
            "slice_s": round(slice_s, 3), "mean_output_tps": mean,
            "mean_output_tps_per_gpu": mean / gpus if mean is not None else None}


def series_block(m: Measurement) -> dict | None:
    counters = counter_series(m.samples)
    if not counters["t"]:
        return None
    slice_s = counters["t"][-1] / len(counters["t"])
    t0, requests = m.run_started or 0.0, list(m.records.requests)
    done = record_series(requests, t0, slice_s, len(counters["t"]))
    w = m.records.window
    return {"slice_s": round(slice_s, 3), **counters, **done,
            "client_open": client_open(requests, t0, counters["t"], until=w[1] - t0 if w else None,
                                       unanswered=m.records.unanswered or 0)}
