"""One point against a running deployment: wait for idle engines, replay the point's load with its generator, and
collect what it measured (the generator's records, the engines' counters around it).

Nothing here judges or writes a result (rackbench.results does). A run that fails still yields its measurement:
:class:`MeasurementFailed` carries it, so the caller stores what was measured before the error is reported.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from rackbench.catalog.points import Point
from rackbench.core.results_folder import CaseFolder
from rackbench.load import client, reuse, series, stopping, traces
from rackbench.load.generator import Invocation, LoadGenerator, LoadJob
from rackbench.load.progress import Phases
from rackbench.load.records import LoadRecords
from rackbench.cluster import ProcessDied
from rackbench.server import counters, host, machine
from rackbench.server.deploy import Deployment, ServerError
from rackbench.recipe.schema.sweep import StopRule
from rackbench.core.timeouts import STOP_MARGIN_S as GRACE_S
from rackbench.server.plan import ServerPlan

log = logging.getLogger(__name__)


class NotIdle(RuntimeError):
    pass


@dataclass
class Measurement:
    """What one point's run measured, whatever became of it."""

    point: Point
    case: CaseFolder
    run_id: str
    generator: str
    records: LoadRecords
    exit_code: int | None = None
    before: counters.Snapshot | None = None
    after: counters.Snapshot | None = None
    idle_wait_s: float | None = None
    started_at: str = ""
    finished_at: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    stopped_by: str | None = None        # what ended the run early (an exception's one line), None when it ran out
    interrupted: bool = False            # the session was interrupted (Ctrl-C, SIGTERM) during the point
    server_died: str | None = None       # a server process that was no longer running after the point (one line)
    out_dir: Path | None = None          # the generator's own output folder, as it ran
    machine: list[dict] = field(default_factory=list)    # each host's record (the deployment's)
    machine_extra: dict = field(default_factory=dict)    # a site's machine fields
    telemetry: dict | None = None        # GPU samples during the run (rackbench.server.machine), the whole span
    telemetry_rows: dict = field(default_factory=dict)   # every sampled row by node, for the window's figures
    telemetry_started: float = 0.0       # wall clock when the samplers were launched (the rows' time origin)
    host: dict | None = None             # each process's CPU time per second during the run (rackbench.server.host)
    ready_workers: int | None = None     # serving instances ready at the point's start
    expected_workers: int | None = None  # ... and how many the deployment started with
    kv_events_before: dict | None = None  # the KV router's applied events before the run, by status (None: no router)
    kv_events_after: dict | None = None
    power: list = field(default_factory=list)   # every GPU power sample: (wall clock, GPU uuid, W)
    samples: list = field(default_factory=list)        # the counters every slice (rackbench.load.series)
    mode: str = "fixed"                  # the run-length rule that ran (profile.load.stop.mode, or --run-length)
    stop_reason: str | None = None       # why the run ended when it did
    stopped_at_s: float | None = None    # when rackbench ended it (None: it ran out)
    stop_samples: int | None = None      # the counters' samples the stopping rule had seen when it stopped the run
    looks: list = field(default_factory=list)          # (checkpoint s, what the stopping rule found)
    run_started: float | None = None     # wall clock when the generator started (the series' zero)


class MeasurementFailed(Exception):
    """The run failed; ``measurement`` holds what it measured before it did (``__cause__`` is why)."""

    def __init__(self, measurement: Measurement):
        self.measurement = measurement
        super().__init__(measurement.stopped_by)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def trace_spec(point: Point, run_id: str) -> traces.TraceSpec | None:
    """The generated agentic sessions of a point (keyed by the point and the run), or None for a named corpus."""
    load = point.profile.spec.load
    if load.dataset != "generated":
        return None
    shape = load.trace
    return traces.TraceSpec(sessions=point.concurrency * shape.sessions_per_concurrency, turns=shape.turns,
                            system_words=shape.system_words, user_words=shape.user_words,
                            tool_words=shape.tool_words, assistant_words=shape.assistant_words,
                            output_tokens=shape.output_tokens, think_ms=shape.think_ms,
                            subagent_rate=shape.subagent_rate, seed=load.seed, marker=f"{point.id} {run_id}")


def job_for(point: Point, plan: ServerPlan, case: CaseFolder, run_id: str, write: bool = True) -> LoadJob:
    """The point's load job against ``plan``'s servers, from its client; its generated trace is written first
    (``write=False``: only counted, for render)."""
    spec = trace_spec(point, run_id)
    trace, sessions = None, None
    if spec is not None:
        trace = case.trace
        sessions = traces.write(spec, case.trace)["sessions"] if write else traces.sessions(spec)
    return LoadJob(point, plan.api_url, plan.model_name, tuple(plan.metrics_urls), case, run_id, plan.client, trace,
                   sessions)


def invocation(generator: LoadGenerator, job: LoadJob) -> Invocation:
    """What runs the point where its client runs: the generator's invocation, and the trace's reuse measured first
    (rackbench.load.reuse)."""
    return reuse.with_step(job, generator.invocation(job))


def stop_rule(point: Point, run_length: str | None = None) -> StopRule:
    """The point's run-length rule: the profile's ``load.stop``, its mode replaced by --run-length when given."""
    rule = point.profile.spec.load.stop
    return rule.model_copy(update={"mode": run_length}) if run_length else rule


def measure(point: Point, dep: Deployment, generator: LoadGenerator, case: CaseFolder, *, run_id: str,
            progress: Callable[[str], None] | None = None, tick_s: float = 10.0,
            run_length: str | None = None, decide=None) -> Measurement:
    """Measure one point with the load generator where the plan's client runs, its counters scraped every slice
    and, with an adaptive run length, stopped once its throughput is known, or with ``decide`` (``decide(requests,
    looks)``: the caller's verdict so far, a reason to stop or None) once its decision is (rackbench.load.stopping);
    MeasurementFailed (with what was measured) when the run cannot complete."""
    load = point.profile.spec.load
    rule = stop_rule(point, run_length)
    case.root.mkdir(parents=True, exist_ok=True)
    m = Measurement(point, case, run_id, generator.name, LoadRecords(generator.name), started_at=now(),
                    versions=dict(dep.versions), logs=[str(p.log) for p in dep.processes.values()],
                    machine=list(dep.machine), machine_extra=dict(dep.machine_extra))
    sampling = hostload = None
    out_dir = case.load_dir(generator.name)
    try:
        idle, m.idle_wait_s = dep.wait_idle(timeout=load.idle_wait_s)
        if not idle:
            raise NotIdle(f"{point.id}: engines still busy after {m.idle_wait_s:.0f} s (profile.load.idle_wait_s); "
                          "the previous point's requests would leak into this one")
        dep.check_answering()        # before the load: the server that answers is this deployment's own
        m.ready_workers, m.expected_workers = dep.ready_workers()
        inv = invocation(generator, job_for(point, dep.plan, case, run_id))
        inv.env.update(host.client_env(dep.token))     # the host samplers count the load generator by it
        out_dir = inv.out_dir
        m.before = dep.counters()
        m.kv_events_before = dep.kv_events()

        phases = Phases(load.duration_s, point.concurrency)

        def tick(elapsed: float) -> None:
            if progress is None:
                return
            seen = sampler.snapshot()
            for sample in seen:                    # when the warm-up ended, to the slice, not to the line
                phases.observe(sample.t, sample.snap.requests_succeeded - m.before.requests_succeeded)
            # the sampler's last scrape, not a scrape of its own: a busy server answers /metrics seconds late, and
            # the line (and with it the generator's wait) would wait for it (31 s without a line at c24 on 2 cores)
            done = seen[-1].snap.requests_succeeded - m.before.requests_succeeded if seen else None
            progress(f"{point.id}: {phases.line(elapsed, done)}, {generator.progress(out_dir)}")

        sampling = machine.start(dep.plan, dep.allocation, dep.machine, case)
        hostload = host.start(dep.plan, dep.allocation, dep.token, case)
        m.mode = rule.mode
        control = (stopping.Controller(rule, load.duration_s) if rule.mode == "adaptive" else
                   stopping.DecideController(rule, load.duration_s, lambda: generator.records(out_dir).requests,
                                             decide) if rule.mode == "decide" and decide is not None else None)
        sampler = series.CounterSampler(dep, rule.slice_s)

        def should_stop(elapsed: float) -> str | None:
            # one snapshot for the look and for the record of it: the result's steady state is then the very series
            # the rule judged (a scrape landing between the two made a stopped run's result say "too few batch
            # means" where its stop reason said stationary: CI on a busy 2-core machine, 2026-12-06)
            seen = sampler.snapshot()
            done = seen[-1].snap.requests_succeeded - seen[0].snap.requests_succeeded if len(seen) > 1 else 0.0
            reason = control.poll(elapsed, lambda: series.token_rates(seen, rule.slice_s),
                                  lambda: done) if control is not None else None
            if reason:
                m.stop_reason, m.stopped_at_s = reason, round(elapsed, 1)
                m.stop_samples = len(seen)
                log.info("%s: %s", point.id, reason)
            return reason
        m.run_started = time.time()
        sampler.start()
        try:
            m.exit_code = generator.run(inv, timeout=load.duration_s + load.warmup_grace_s + GRACE_S, on_tick=tick,
                                        tick_s=tick_s, start=client.starter(dep.plan.client, dep.allocation, inv),
                                        should_stop=should_stop, setup=client.has_setup(dep.plan.client, inv))
        finally:
            m.samples = sampler.stop()
            m.looks = list(control.looks) if control is not None else []
        if m.stop_reason is None:
            m.stop_reason = ("ran its whole duration_s: " + (control.decision.reason if control and control.decision
                                                             else "no checkpoint reached") if control is not None
                             else f"fixed run length: duration_s {load.duration_s} s" + (
                                 " (decide: no SLO gate or search tier to decide on)" if rule.mode == "decide"
                                 else ""))
        m.telemetry, m.power = sampling.stop(), sampling.power
        m.telemetry_rows, m.telemetry_started, sampling = sampling.rows, sampling.started, None
        m.host, hostload = hostload.stop(), None
        client.check_after(dep.plan.client, inv, m.exit_code, generator.wrote(out_dir))
    except BaseException as err:
        m.stopped_by = _one_line(err)
        # Ctrl-C, SIGTERM (SystemExit), a pytest --timeout (rackbench.plugin.timeout): anything but an Exception
        # stopped the point from outside; what it measured is no measurement
        m.interrupted = not isinstance(err, Exception)
        if sampling is not None:
            m.telemetry, m.power = sampling.stop(), sampling.power
        if hostload is not None:
            m.host = hostload.stop()
        _finish(m, dep, generator, out_dir)
        raise MeasurementFailed(m) from err
    _finish(m, dep, generator, out_dir)
    return m


def _finish(m: Measurement, dep: Deployment, generator: LoadGenerator, out_dir: Path) -> None:
    """Counters after the run and the generator's records: a dead server or a torn file must not hide either."""
    m.finished_at = now()
    m.out_dir = out_dir
    try:
        dep.check()
    except ProcessDied as died:
        m.server_died = died.line
    if m.before is not None and m.server_died is None:
        try:
            m.after = dep.counters()
            m.kv_events_after = dep.kv_events() if m.kv_events_before is not None else None
        except ProcessDied as died:
            m.server_died = died.line
        except ServerError as err:
            log.warning("%s: no counters after the run: %s", m.point.id, err)
    m.records = generator.records(out_dir)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")
