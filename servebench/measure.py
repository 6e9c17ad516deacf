"""One point against a running deployment: wait for idle engines, replay the trace with AIPerf, build, validate
and write the result. Nothing measured is lost: the result is written (atomically) even when the run failed."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .load import aiperf, traces
from .matrix import Point
from .result import PointResult, Verdict, read, write
from .results import build
from .server import metrics
from .server.deploy import Deployment


class NotIdle(RuntimeError):
    pass


@dataclass(frozen=True)
class Measured:
    result: PointResult
    path: Path           # the result JSON in the case directory
    copy: Path           # the same file in <results>/points/, where reports read from
    reused_from: Path | None = None

    def with_verdict(self, verdict: Verdict) -> "Measured":
        """Store the case's verdict with the point (both copies, atomically)."""
        judged = self.result.model_copy(update={"verdict": verdict})
        write(self.path, judged)
        write(self.copy, judged)
        return Measured(judged, self.path, self.copy, self.reused_from)


def reusable(point: Point, reuse_dir: Path) -> tuple[PointResult | None, str]:
    """A prior result for this point that may stand in for a new run, or None and why not."""
    path = Path(reuse_dir) / "points" / f"{point.id}.json"
    if not path.is_file():
        return None, f"no prior result at {path}"
    try:
        prior = read(path)
    except ValueError as err:
        return None, str(err)
    if prior.identity.recipe_fingerprint != point.profile.fingerprint:
        return None, f"{path} was measured with another recipe (fingerprint {prior.identity.recipe_fingerprint[:12]} " \
                     f"!= {point.profile.fingerprint[:12]})"
    return prior, str(path)


def reuse(point: Point, prior: PointResult, source: Path, results_dir: Path) -> Measured:
    """Copy a prior result into this run's results (marked reused); it is judged anew, like a new one."""
    prior = prior.model_copy(update={"verdict": None})
    case = results_dir / point.profile.id / point.id
    path = case / "result.json"
    write(path, prior)
    copy = results_dir / "points" / f"{point.id}.json"
    write(copy, prior)
    return Measured(prior, path, copy, reused_from=Path(source))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def measure(point: Point, dep: Deployment, *, run_id: str, results_dir: Path, aiperf_bin: str,
            tokenizer_dir: Path, progress=None, tick_s: float = 15.0, extend=None) -> Measured:
    """``progress(text)`` receives a status line every ``tick_s`` seconds while AIPerf runs; ``extend(result)``
    returns site fields stored under ``result.extra`` (the pytest_servebench_result_fields hook)."""
    prof, load = point.profile, point.profile.spec.load
    case = results_dir / prof.id / point.id
    case.mkdir(parents=True, exist_ok=True)
    started = _now()

    idle, waited = dep.wait_idle(timeout=load.idle_wait_s)
    if not idle:
        raise NotIdle(f"{point.id}: engines still busy after {waited:.0f} s (profile.load.idle_wait_s); "
                      "the previous point's requests would leak into this one")

    hf = results_dir / ".hf-cache"
    tokenizer = aiperf.offline_tokenizer(tokenizer_dir, hf, prof.spec.model)
    trace_file, sessions = None, None
    if load.dataset == "generated":
        shape = load.trace
        spec = traces.TraceSpec(sessions=point.concurrency * shape.sessions_per_concurrency, turns=shape.turns,
                                system_words=shape.system_words, user_words=shape.user_words,
                                tool_words=shape.tool_words, assistant_words=shape.assistant_words,
                                output_tokens=shape.output_tokens, think_ms=shape.think_ms,
                                subagent_rate=shape.subagent_rate, seed=load.seed,
                                marker=f"{point.id} {run_id}")
        trace_file = case / "trace.jsonl"
        sessions = traces.write(spec, trace_file)["sessions"]

    artifact = case / "aiperf"
    argv = aiperf.command(prof, point, dep.plan, aiperf_bin=aiperf_bin, artifact_dir=artifact,
                          tokenizer=tokenizer, trace=trace_file, sessions=sessions)
    tmp = Path(tempfile.mkdtemp(prefix="sb-aiperf-"))
    inv = aiperf.Invocation(argv, aiperf.environment(case, hf, tmp), artifact, case / "aiperf.log")
    before = metrics.total(list(dep.scrape().values()))
    rc = None

    def tick(elapsed: float) -> None:
        if progress is None:
            return
        try:
            done = metrics.total(list(dep.scrape().values())).requests_succeeded - before.requests_succeeded
        except Exception:  # noqa: BLE001 - a status line must not fail the point
            done = float("nan")
        progress(f"{point.id}: {elapsed:.0f} s of ~{load.duration_s} s, {done:.0f} requests done, "
                 f"{aiperf.errors_so_far(artifact)} errors so far")

    try:
        rc = aiperf.run(inv, timeout=load.duration_s + load.warmup_grace_s + 900, on_tick=tick, tick_s=tick_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        after = None
        try:
            after = metrics.total(list(dep.scrape().values()))
        except Exception:  # noqa: BLE001 - a dead server must not hide the result
            pass
        result = build(point, run_id=run_id, artifact_dir=artifact, aiperf_exit_code=rc, versions=dep.versions,
                       before=before, after=after, idle_wait_s=round(waited, 2), started_at=started,
                       finished_at=_now(), logs=[str(p.log) for p in dep.processes.values()])
        if extend is not None:
            result = result.model_copy(update={"extra": extend(result)})
        path = case / "result.json"
        write(path, result)
        copy = results_dir / "points" / f"{point.id}.json"
        write(copy, result)
    return Measured(result, path, copy)
