"""rackbench's fixtures, all named ``sb_*`` so they never clash with a user's conftest.

``sb_profile`` (session, keyed by profile id) and ``sb_allocation_key`` (the profile id, or one part of its points when
they are split to fit the job's time limit) -> ``sb_allocation`` (one per key) -> ``sb_deployment`` (servers, started
once per allocation) -> ``sb_measured`` (this point, measured or reused) -> ``sb_judge`` (the verdict,
computed once and stored with the point). The allocation, placement, plan and start are the profile's run
assembly (rackbench.server.assembly), the same one preflight and render use.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from rackbench.catalog.points import Point
from rackbench.core import poll
from rackbench.cluster import Allocation, ClusterError, ProcessDied
from rackbench.load.generator import LoadGenerator, generator_for
from rackbench.load.client import ClientSetupFailed, FilesNotBack
from rackbench.load.preflight import check_steps
from rackbench.load.measure import MeasurementFailed, NotIdle, measure
from rackbench.plugin.gates import against
from rackbench.plugin.session import ALLOCATION, of
from rackbench.recipe.profile import Profile
from rackbench.report.summary import properties
from rackbench.results.model import PointResult, Verdict
from rackbench.results.point import Stored, reusable, reuse, store, store_failed
from rackbench.results.schema import file_problems
from rackbench.results.slo import decider_for
from rackbench.results.verdict import judge
from rackbench.server.ports import PortTaken
from rackbench.server import deploy, login_checks, preflight
from rackbench.server.findings import Report

log = logging.getLogger(__name__)

OFFLOAD_ON_CPU = ("SimpleCPUOffloadConnector does not run on vLLM's CPU build (its worker calls the CUDA-only "
                  "torch.cuda.Stream.priority_range and engine start-up fails); the offload arm runs only on a GPU "
                  "cluster. Its rendering, DRAM budget and metric parsing are tested offline (tests/test_servers.py)")


def unavailable(profile: Profile, config: pytest.Config) -> str | None:
    """Why this profile cannot run here, or None."""
    cl = profile.cluster
    backend = of(config).assembly(profile).backend
    if cl.kind == "gpu":
        if config.getoption("--cluster") != cl.name:
            if not backend.scheduled:
                return (f"needs cluster {cl.name} ({cl.nodes * cl.gpus_per_node} x {cl.gpu_type.upper()} GPU(s) on "
                        f"this machine, no scheduler); run on that machine with --cluster {cl.name}")
            return (f"needs cluster {cl.name} ({cl.gpus_per_node} x {cl.gpu_type.upper()} GPUs per node via "
                    f"{cl.backend}); run on its login node with --cluster {cl.name}")
    elif profile.offload:
        return OFFLOAD_ON_CPU
    why = backend.unavailable()
    if why:
        return f"--cluster {cl.name} given, but {why}" if cl.kind == "gpu" else why
    return None


def generator(profile: Profile, config: pytest.Config) -> LoadGenerator:
    path = config.getoption("load_bin")
    if path and not Path(path).is_absolute():
        path = str(Path(config.rootpath) / path)
    return generator_for(profile.spec.load.generator, path)


def missing_tools(profile: Profile, config: pytest.Config) -> str | None:
    """Locally installed components a profile needs before nodes are worth allocating."""
    if profile.cluster.kind == "embedded":
        python = Path(config.rootpath) / profile.cluster.runtime.python
        if not python.exists():
            return f"the serving venv is missing ({python}): run scripts/install-servers"
    gen = generator(profile, config)
    if profile.cluster.runtime.client.executable and not gen.explicit():
        return None          # the cluster's client brings its own (on the node: preflight checks it there)
    return gen.unavailable()


@pytest.fixture
def sb_point(request: pytest.FixtureRequest) -> Point:
    """The (profile, concurrency) point of this case."""
    return of(request.config).point(request.param)


@pytest.fixture(scope="session")
def sb_profile(request: pytest.FixtureRequest) -> Profile:
    """The profile of this case (session-scoped, keyed by profile id)."""
    return of(request.config).profile(request.param)


@pytest.fixture(scope="session")
def sb_allocation_key(request: pytest.FixtureRequest) -> str:
    """Which allocation this case's point runs in (the profile id; with its part when the points are split)."""
    return request.param


@pytest.fixture(scope="session")
def sb_allocation(sb_profile: Profile, sb_allocation_key: str, request: pytest.FixtureRequest):
    """The nodes of one profile (or of one part of its points), allocated once and shared by all its points;
    released before the next allocation."""
    config = request.config
    reason = unavailable(sb_profile, config)
    if reason:
        pytest.skip(f"{sb_profile.id}: {reason}")
    session = of(config)
    assembly = session.assembly(sb_profile, sb_allocation_key)
    req = assembly.request()          # once: a site's allocation hook adjusts it once
    short = assembly.limit_problem(req)
    if short:
        pytest.fail(f"{sb_profile.id}: not allocated: {short}", pytrace=False)
    missing = login_checks.before_sbatch(sb_profile, req)     # before the queue wait, not after it
    if missing:
        pytest.fail(f"{sb_profile.id}: not allocated: the login node sees what the job needs missing\n" +
                    "\n".join(Report(sb_profile.id, missing).lines()[1:]), pytrace=False)
    requested = time.time()
    alloc: Allocation = assembly.allocate(req)
    entry = session.manifest.allocated(sb_allocation_key, {**alloc.describe(), "requested_at": requested,
                                                          "gpus": sb_profile.topology.gpus})
    try:
        yield alloc
    finally:
        try:
            alloc.release()
        except ClusterError as err:     # said once, with what to do; the manifest keeps the job
            log.error("%s: %s", sb_profile.id, err)
            entry["release_error"] = str(err)
        session.manifest.released(entry, alloc.describe())


@pytest.fixture(scope="session")
def sb_deployment(sb_profile: Profile, sb_allocation_key: str, sb_allocation: Allocation,
                  request: pytest.FixtureRequest):
    """The running servers of one allocation, started once and shared by all its concurrency points."""
    config, profile = request.config, sb_profile
    missing = missing_tools(profile, config)
    if missing:
        pytest.skip(f"{profile.id}: {missing}")
    session = of(config)
    assembly = session.assembly(profile, sb_allocation_key)
    model_dir = assembly.model_dir()
    try:
        where, server_plan = assembly.plan(sb_allocation, model_dir)
    except PortTaken as err:            # a port the recipe pins, held by another session here: one line
        pytest.fail(f"{profile.id}: servers did not start: {err}", pytrace=False)

    def preflight_first(dep: deploy.Deployment) -> None:
        """Every hardware run checks its nodes before any weights load."""
        report = preflight.run(profile, server_plan, sb_allocation, where, assembly.folder,
                               extra=check_steps(profile, session.results), mounts_checked=True)
        if not report.ok:
            raise deploy.ServerError("\n".join(report.lines()))
    if profile.cluster.kind == "gpu":   # before etcd/NATS: no container starts where a mount source is missing
        absent = preflight.mounts_report(profile, sb_allocation, where, assembly.folder, time.monotonic())
        if absent is not None:
            pytest.fail(f"{profile.id}: servers did not come up: " + "\n".join(absent.lines()), pytrace=False)
    try:
        dep = assembly.start(sb_allocation, model_dir, server_plan,
                             before_servers=preflight_first if profile.cluster.kind == "gpu" else None)
    except (deploy.ServerError, ProcessDied) as err:
        pytest.fail(f"{profile.id}: servers did not come up: {err}", pytrace=False)
    dep.machine_extra = machine_fields(config, profile, dep.machine)
    session.manifest.server_started(sb_allocation_key, {
        "kind": server_plan.kind, "api_url": server_plan.api_url, "ready_seconds": round(dep.ready_seconds, 1),
        "engines": len(server_plan.engines), "versions": dep.versions})
    yield dep


def _call_site_hook(config: pytest.Config, hook: str, given: dict) -> dict:
    """Every implementation of a site's field hook, merged; each is called with the arguments it declares (as
    pluggy calls hooks), and one that raises is logged and left out: it never costs a run its result."""
    extra: dict = {}
    for impl in getattr(config.pluginmanager.hook, hook).get_hookimpls():
        try:
            extra.update(impl.function(**{a: given[a] for a in impl.argnames}) or {})
        except Exception:  # noqa: BLE001 - a site hook never costs a point its result
            log.exception("%s hook %s failed; its fields are left out", hook, impl.plugin_name)
    return extra


def machine_fields(config: pytest.Config, profile: Profile, machine: list[dict]) -> dict:
    """The site's pytest_rackbench_machine_info fields for a deployment."""
    return _call_site_hook(config, "pytest_rackbench_machine_info", {"profile": profile, "machine": machine})


def site_fields(config: pytest.Config, point: Point) -> Callable[[PointResult], dict]:
    """The site's pytest_rackbench_result_fields, merged; each implementation is called with the arguments it
    declares (as pluggy calls hooks), and one that raises is logged and left out: it never costs a point its
    result, nor the other implementations their fields."""
    def extend(result: PointResult) -> dict:
        return _call_site_hook(config, "pytest_rackbench_result_fields", {"point": point, "result": result})
    return extend


@pytest.fixture
def sb_measured(sb_point: Point, sb_profile: Profile, sb_allocation_key: str, request: pytest.FixtureRequest,
                record_property) -> Stored:
    """This point's result: reused from --reuse-results when it matches, else measured by the profile's load
    generator against its deployment (started on first use). The result is written before any assertion, and a
    run that fails still stores what it measured."""
    config = request.config
    session = of(config)
    session.start_run()
    reuse_dir = config.getoption("--reuse-results")
    if reuse_dir:
        found = reusable(sb_point, Path(reuse_dir))
        if found.prior is not None:
            out = reuse(sb_point, found, session.results)
            record_property("reused", str(out.reused_from))
            return out
        record_property("reuse_miss", found.miss)
    deployment = request.getfixturevalue("sb_deployment")
    request.node.stash[ALLOCATION] = deployment.allocation
    extend = site_fields(config, sb_point)
    case = session.results.case(sb_profile.id, sb_point.id)
    try:
        m = measure(sb_point, deployment, generator(sb_profile, config), case, run_id=session.run_id,
                    progress=_status_line(config), run_length=config.getoption("run_length"),
                    decide=decider_for(sb_profile))
    except MeasurementFailed as failed:
        store_failed(failed.measurement, session.results, failed.__cause__, extend)
        cause = failed.__cause__
        if isinstance(cause, (NotIdle, ProcessDied, deploy.ServerError, ClientSetupFailed, FilesNotBack)):
            pytest.fail(f"{sb_point.id}: {cause}", pytrace=False)
        raise cause from None
    return store(m, session.results, extend)


@pytest.fixture
def sb_judge(sb_point: Point, request: pytest.FixtureRequest, record_property) -> Callable[[Stored], Verdict]:
    """Judge a measured point once (its gates, the --baseline gate, the written file against the JSON Schema),
    store the verdict with the point, and record its metrics as junit properties."""
    session = of(request.config)

    def judge_and_store(measured: Stored) -> Verdict:
        errors = file_problems(measured.path) if measured.path.is_file() else [f"no result file at {measured.path}"]
        verdict = judge(measured.result, sb_point.profile, session.baseline, session.baseline_file, errors,
                        against=against(request.config, measured.result, measured.requests))
        stored = measured.with_verdict(verdict)
        for name, value in properties(stored.result).items():
            record_property(name, value)
        return verdict
    return judge_and_store


def _status_line(config: pytest.Config):
    """A writer of live status lines to the real terminal, past pytest's output capture (None without one)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def write(text: str) -> None:
        if capture is None:
            reporter.write_line(f"    {text}")
            return
        # resuming the capture sets sys.stdout/sys.stderr to pytest's own: whoever had redirected them (a CLI run
        # in-process under contextlib.redirect_stdout) gets them back, or its later output would go astray
        held = sys.stdout, sys.stderr
        try:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"    {text}")
        finally:
            sys.stdout, sys.stderr = held
    return write


SPEAK_S = 10          # a wait says where it is this often (scripts/bench must never be silent for 30 s: a release
#                       before a server's start is silent, so the readiness wait speaks early)


def speak_while_waiting(config: pytest.Config) -> Callable[[], None]:
    """Every wait of the session (rackbench.core.poll: a server's readiness, a model's generation, a job's start)
    says what it waits for and for how long, on the status line, every SPEAK_S seconds; returns the function that
    stops it."""
    said = [0.0]

    def heard(what: str, waited: float, last: object) -> None:
        now = time.monotonic()
        if waited >= SPEAK_S and now - said[0] >= SPEAK_S:
            write = _status_line(config)       # asked each time: no terminal reporter yet when the plugin configures
            if write is not None:
                said[0] = now
                write(f"waiting for {what}: {waited:.0f} s so far ({last})")
    return poll.listen(heard)
