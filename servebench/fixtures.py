"""servebench's fixtures, all named ``sb_*`` so they never clash with a user's conftest.

``sb_profile`` (session, keyed by profile id) -> ``sb_allocation`` (one per profile) -> ``sb_deployment`` (servers,
started once per profile) -> ``sb_measured`` (this point, measured or reused) -> ``sb_judge`` (the verdict,
computed once and stored with the point).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import pytest

from .cluster import Allocation, ProcessDied, backend_for
from . import preflight
from .cluster.request import configs_dir, request_for
from .matrix import Point
from .cluster.local import visible_gpus
from .measure import Measured, NotIdle, measure, reusable, reuse
from .models import GENERATED, ensure_model
from .profile import Profile
from .result import PointResult, Verdict, file_problems
from .server import deploy
from .server.placement import Ports, free_ports, placement_for
from .server.plan import plan
from .session import ALLOCATION, of
from .summary import properties
from .verdict import judge

log = logging.getLogger(__name__)

OFFLOAD_ON_CPU = ("SimpleCPUOffloadConnector does not run on vLLM's CPU build (its worker calls the CUDA-only "
                  "torch.cuda.Stream.priority_range and engine start-up fails); the offload arm runs only on a GPU "
                  "cluster. Its rendering, DRAM budget and metric parsing are tested offline (tests/test_servers.py)")


def unavailable(profile: Profile, config: pytest.Config) -> str | None:
    """Why this profile cannot run here, or None."""
    cl = profile.cluster
    if cl.kind == "gpu":
        chosen = config.getoption("--cluster")
        if chosen != cl.name:
            if cl.backend == "local":
                return (f"needs cluster {cl.name} ({cl.nodes * cl.gpus_per_node} x {cl.gpu_type.upper()} GPU(s) on "
                        f"this machine, no scheduler); run on that machine with --cluster {cl.name}")
            return (f"needs cluster {cl.name} ({cl.gpus_per_node} x {cl.gpu_type.upper()} GPUs per node via "
                    f"Slurm); run on its login node with --cluster {cl.name}")
        if cl.backend == "local":
            have, need = visible_gpus(), cl.nodes * cl.gpus_per_node
            if have < need:
                return f"--cluster {cl.name} given, but this machine shows {have} GPU(s) (nvidia-smi -L), {need} needed"
    elif profile.offload:
        return OFFLOAD_ON_CPU
    why = backend_for(cl.backend).unavailable()
    if why:
        return f"--cluster {cl.name} given, but {why}" if cl.kind == "gpu" else why
    return None


def missing_tools(profile: Profile, config: pytest.Config) -> str | None:
    """Locally installed components a profile needs before nodes are worth allocating."""
    root = Path(config.rootpath)
    if profile.cluster.kind == "embedded":
        python = root / profile.cluster.runtime.python
        if not python.exists():
            return f"the serving venv is missing ({python}): run scripts/install-servers"
    aiperf = aiperf_bin(config)
    if not aiperf.exists():
        return f"AIPerf is not installed at {aiperf}: run scripts/install-servers (or pass --aiperf-bin)"
    return None


def aiperf_bin(config: pytest.Config) -> Path:
    path = Path(config.getoption("--aiperf-bin"))
    return path if path.is_absolute() else Path(config.rootpath) / path


@pytest.fixture
def sb_point(request: pytest.FixtureRequest) -> Point:
    """The (profile, concurrency) point of this case."""
    return of(request.config).point(request.param)


@pytest.fixture(scope="session")
def sb_profile(request: pytest.FixtureRequest) -> Profile:
    """The profile of this case (session-scoped, keyed by profile id)."""
    return of(request.config).profile(request.param)


@pytest.fixture(scope="session")
def sb_allocation(sb_profile: Profile, request: pytest.FixtureRequest):
    """The nodes of one profile, allocated once and shared by all its points; released between profiles."""
    config = request.config
    reason = unavailable(sb_profile, config)
    if reason:
        pytest.skip(f"{sb_profile.id}: {reason}")
    session = of(config)
    wanted = request_for(sb_profile, session.run_id, session.results_dir)
    wanted = config.hook.pytest_servebench_allocation_request(profile=sb_profile, request=wanted) or wanted
    alloc: Allocation = backend_for(sb_profile.cluster.backend).allocate(wanted)
    entry = session.manifest.allocated(sb_profile.id, alloc.describe())
    try:
        yield alloc
    finally:
        alloc.release()
        session.manifest.released(entry, alloc.describe())


def _model_dir(profile: Profile, config: pytest.Config, log_dir: Path) -> Path | None:
    """The model as the login node sees it: generated for the embedded default, else the cluster's path."""
    alias = profile.recipe.model.path
    if alias in GENERATED:
        python = str(Path(config.rootpath) / profile.cluster.runtime.python)
        return ensure_model(alias, python, log_dir / "model-generation.log")
    path = profile.cluster.runtime.model_paths.get(alias)
    return Path(path) if path else None


def _free_ports(config: pytest.Config, nodes: int) -> Ports:
    """Local deployments share this host: each xdist worker searches its own block of ports."""
    worker = getattr(config, "workerinput", {}).get("workerid", "gw0")
    return free_ports(nodes, start=1000 * int(worker[2:] or 0) if worker.startswith("gw") else 0)


@pytest.fixture(scope="session")
def sb_deployment(sb_profile: Profile, sb_allocation: Allocation, request: pytest.FixtureRequest):
    """The running servers of one profile, started once and shared by all its concurrency points."""
    config, profile = request.config, sb_profile
    missing = missing_tools(profile, config)
    if missing:
        pytest.skip(f"{profile.id}: {missing}")
    session = of(config)
    work = session.results_dir / profile.id
    logs = work / "logs"
    model_dir = _model_dir(profile, config, logs)
    local = sb_allocation.backend == "local" or profile.cluster.kind == "embedded"   # nodes share this host
    where = placement_for(profile, sb_allocation.nodes, sb_allocation.addresses(), str(work),
                          root=str(config.rootpath), model_dir=str(model_dir) if model_dir else None,
                          ports=_free_ports(config, len(sb_allocation.nodes)) if local else Ports(),
                          job_id=sb_allocation.job_id or session.run_id, configs=str(configs_dir(profile)))
    server_plan = plan(profile, where)

    def preflight_first(dep: deploy.Deployment) -> None:
        """Every hardware run checks its nodes before any weights load."""
        report = preflight.run(profile, server_plan, sb_allocation, where, logs)
        if not report.ok:
            raise deploy.ServerError("\n".join(report.lines()))
    try:
        dep = deploy.start(profile, server_plan, sb_allocation, logs, tokenizer_dir=model_dir,
                           before_servers=preflight_first if profile.cluster.kind == "gpu" else None)
    except (deploy.ServerError, ProcessDied) as err:
        pytest.fail(f"{profile.id}: servers did not come up: {err}", pytrace=False)
    deploy.dump(dep, work / "deployment.json")
    session.manifest.server_started(profile.id, {
        "kind": server_plan.kind, "api_url": server_plan.api_url, "ready_seconds": round(dep.ready_seconds, 1),
        "engines": len(server_plan.engines), "versions": dep.versions})
    yield dep


def _site_fields(config: pytest.Config, point: Point) -> Callable[[PointResult], dict]:
    def extend(result: PointResult) -> dict:
        extra: dict = {}
        for impl in config.pluginmanager.hook.pytest_servebench_result_fields.get_hookimpls():
            try:
                extra.update(impl.function(point=point, result=result) or {})
            except Exception:  # noqa: BLE001 - a site hook never costs a point its result
                log.exception("pytest_servebench_result_fields hook %s failed; its fields are left out", impl.plugin_name)
        return extra
    return extend


@pytest.fixture
def sb_measured(sb_point: Point, sb_profile: Profile, request: pytest.FixtureRequest, record_property) -> Measured:
    """This point's result: reused from --reuse-results when it matches, else measured with AIPerf against the
    profile's deployment (started on first use). The result is written before any assertion."""
    config = request.config
    session = of(config)
    out = None
    reuse_dir = config.getoption("--reuse-results")
    if reuse_dir:
        prior, why = reusable(sb_point, Path(reuse_dir))
        if prior is not None:
            out = reuse(sb_point, prior, Path(why), session.results_dir)
            record_property("reused", str(out.reused_from))
        else:
            record_property("reuse_miss", why)
    if out is None:
        deployment = request.getfixturevalue("sb_deployment")
        request.node.stash[ALLOCATION] = deployment.allocation
        try:
            out = measure(sb_point, deployment, run_id=session.run_id, results_dir=session.results_dir,
                          aiperf_bin=str(aiperf_bin(config)), tokenizer_dir=deployment.tokenizer_dir,
                          progress=_status_line(config), extend=_site_fields(config, sb_point))
        except (NotIdle, ProcessDied) as err:
            pytest.fail(f"{sb_point.id}: {err}", pytrace=False)
    return out


@pytest.fixture
def sb_judge(sb_point: Point, request: pytest.FixtureRequest, record_property) -> Callable[[Measured], Verdict]:
    """Judge a measured point once (its gates, the --baseline gate, the written file against the JSON Schema),
    store the verdict with the point, and record its metrics as junit properties."""
    session = of(request.config)

    def judge_and_store(measured: Measured) -> Verdict:
        errors = file_problems(measured.path) if measured.path.is_file() else [f"no result file at {measured.path}"]
        verdict = judge(measured.result, sb_point.profile, session.baseline, session.baseline_file, errors,
                        against=_against(request.config, measured))
        stored = measured.with_verdict(verdict)
        for name, value in properties(stored.result).items():
            record_property(name, value)
        return verdict
    return judge_and_store


def _against(config: pytest.Config, measured: Measured):
    """(runs, change of output tok/s per GPU) against --compare-run's runs of the same point, or None."""
    from contextlib import closing

    from . import history
    from .compare import compare_groups

    key = config.getoption("--compare-run")
    if not key:
        return None
    session = of(config)
    r = measured.result
    db = config.getoption("--history") or str(session.results_dir / "history.sqlite")
    with closing(history.connect(db)) as con:
        runs = history.resolve_runs(con, key)       # this run is not in the history until the session ends
        base = [p for run in runs if (p := history.point(con, run, r.identity.case_id)) is not None]
        noise = history.noise(con, r.identity.cluster)
    if not base:
        return None
    mine = {"duration_s": r.throughput.duration_s, "gpus": r.throughput.gpus,
            "output_tps_per_gpu": r.throughput.output_tps_per_gpu,
            "requests": history.request_rows(Path(r.run.artifact_dir))}
    return ", ".join(runs), compare_groups(base, [mine], metrics=("output_tps_per_gpu",), noise=noise)[0]


def _status_line(config: pytest.Config):
    """A writer of live status lines to the real terminal, past pytest's output capture (None without one)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def write(text: str) -> None:
        if capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"    {text}")
        else:
            reporter.write_line(f"    {text}")
    return write
