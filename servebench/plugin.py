"""pytest hooks and fixtures: recipes become cases, one deployment per profile.

* ``pytest_generate_tests`` turns every (profile, concurrency) of the recipe catalog into one case of any
  test that asks for ``deployment`` and ``concurrency``, with a readable id and the profile's markers.
* ``deployment`` is session-scoped and parametrized by profile id: pytest keeps it alive across the points
  of one profile and tears it down before the next profile (its cache key is the profile id).
* A broken recipe fails collection with one message per problem, naming file, key and fix.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from . import summary
from .cluster import Allocation, ProcessDied, backend_for, release_all
from .load.aiperf import DEFAULT_BIN as DEFAULT_AIPERF
from .measure import Measured, NotIdle, measure, reusable, reuse
from .models import GENERATED, ensure_model
from .server import deploy
from .server.plan import Ports, free_ports, placement_for, plan
from .cluster.request import request_for
from .errors import ConfigError
from .manifest import Manifest, merge
from .matrix import Point, points
from .recipe import Catalog, Profile

_CATALOG = pytest.StashKey[Catalog]()
_RUN_ID = pytest.StashKey[str]()
_MANIFEST = pytest.StashKey[Manifest]()
_MERGED = pytest.StashKey[dict]()
_ALLOC = pytest.StashKey[Allocation]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("servebench")
    group.addoption("--recipes", metavar="DIR", help="recipe catalog (default: <rootdir>/recipes)")
    group.addoption("--cluster", metavar="NAME",
                    help="run hardware cases of this cluster (e.g. gb200-nv); without it they are skipped")
    group.addoption("--results-dir", metavar="DIR", default="results",
                    help="where per-point results, logs and reports go (default: results)")
    group.addoption("--reuse-results", metavar="DIR",
                    help="skip points with a schema-valid result of the same recipe fingerprint in DIR/points "
                         "(still judged; marked reused); anything else runs")
    group.addoption("--baseline", metavar="FILE",
                    help="also fail a point whose output tok/s per GPU drops below the baseline's x "
                         "(1 - profile.gates.baseline_tolerance); see `servebench baseline`")
    group.addoption("--aiperf-bin", metavar="PATH", default=os.environ.get("AIPERF_BIN", DEFAULT_AIPERF),
                    help=f"AIPerf executable (its own venv; default: $AIPERF_BIN or {DEFAULT_AIPERF})")


def catalog(config: pytest.Config) -> Catalog:
    if _CATALOG not in config.stash:
        root = config.getoption("--recipes") or Path(config.rootpath) / "recipes"
        config.stash[_CATALOG] = Catalog.load(root)
    return config.stash[_CATALOG]


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    # One run id shared by the controller and its xdist workers.
    run_id = worker["servebench_run_id"] if worker else time.strftime("%Y%m%d-%H%M%S-") + f"{os.getpid()}"
    config.stash[_RUN_ID] = run_id
    results = Path(config.getoption("--results-dir"))
    config.stash[_MANIFEST] = Manifest(results, run_id, worker["workerid"] if worker else "main")
    config.pluginmanager.register(summary.Collector(config), "servebench-summary")
    if config.getoption("--baseline"):
        from .baseline import load
        try:
            config.stash[_BASELINE] = load(Path(config.getoption("--baseline")))
        except ValueError as err:   # a bad baseline stops the run before anything is allocated
            raise pytest.UsageError(str(err)) from None
    atexit.register(release_all)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a CI cancel, scancel of the login job, a timeout wrapper) unwinds like Ctrl-C:
        # pytest then runs every fixture teardown, which releases allocations and stops processes.
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``-n N --dist loadgroup`` each profile's cases run on one worker (one allocation each)."""
    if config.getoption("dist") == "loadgroup":
        from .xdist_sched import ProfileScheduling
        return ProfileScheduling(config, log)
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist hook (controller side), registered only under xdist
    node.workerinput["servebench_run_id"] = node.config.stash[_RUN_ID]


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session):
    # Runs after pytest's own session finish, which tears down the remaining fixtures (and so records
    # every release in the manifest) first.
    result = yield
    config = session.config
    release_all()
    if hasattr(config, "workerinput"):
        return result
    results = Path(config.getoption("--results-dir"))
    if any(results.glob("manifest.*.json")):
        config.stash[_MERGED] = merge(results, config.stash[_RUN_ID])
    return result


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    merged = config.stash.get(_MERGED, None)
    if merged:
        terminalreporter.write_sep("-", "servebench")
        terminalreporter.write_line(
            f"{len(merged['allocations'])} allocation(s), {len(merged['server_starts'])} server start(s); "
            f"manifest: {Path(config.getoption('--results-dir')) / 'manifest.json'}")
    collector = config.pluginmanager.get_plugin("servebench-summary")
    if collector is not None and getattr(collector, "path", None):
        for line in collector.terminal_lines():
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"summary table: {collector.path}; per-point results: "
                                    f"{Path(config.getoption('--results-dir')) / 'points'}")
        rep = getattr(collector, "report", None)
        if rep is not None:
            terminalreporter.write_line("report: " + ", ".join(str(f) for f in rep.files))
        if getattr(collector, "report_error", None):
            terminalreporter.write_line(f"report failed: {collector.report_error}", red=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "point" not in metafunc.fixturenames:
        return
    try:
        cat = catalog(metafunc.config)
    except ConfigError as err:
        pytest.fail(f"invalid recipe(s):\n{err}", pytrace=False)
    params = [
        pytest.param(pt.profile.id, pt.id, id=pt.id,
                     marks=[getattr(pytest.mark, m) for m in pt.markers])
        for pt in points(cat)
    ]
    # Both are indirect: the profile id (shared by a profile's points) is the cache key of the session-scoped
    # `profile` fixture and of everything built on it (allocation, deployment), so pytest keeps them across a
    # profile's cases and tears them down only between profiles; the point id is
    # unique per case, so equal concurrencies of two profiles are never grouped together.
    metafunc.parametrize(["profile", "point"], params, indirect=True, scope="session")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """A failing case shows the log tail of every node process of its allocation that is no longer running."""
    report = yield
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "point" in callspec.params:
        report.user_properties.append(("servebench_case", callspec.params["point"]))
    alloc = getattr(item, "funcargs", {}).get("allocation") or item.stash.get(_ALLOC, None)
    if report.failed and isinstance(alloc, Allocation):
        for proc in alloc.processes:
            if not proc.alive():
                report.sections.append((f"{proc.name} on node {proc.node} exited ({proc.popen.returncode}); "
                                        f"tail of {proc.log}", proc.tail()))
        if callspec is not None and "point" in callspec.params:
            _keep_logs(alloc, _results_dir(item.config) / callspec.params["profile"] / callspec.params["point"])
    return report


def _keep_logs(alloc: Allocation, case_dir: Path) -> None:
    """A failing case keeps a copy of every server log as it was when it failed (the live logs go on)."""
    import shutil

    dest = case_dir / "server-logs"
    dest.mkdir(parents=True, exist_ok=True)
    for proc in alloc.processes:
        try:
            shutil.copy2(proc.log, dest / f"{proc.name}-node{proc.rank}.log")
        except OSError:
            pass


OFFLOAD_ON_CPU = ("SimpleCPUOffloadConnector does not run on vLLM's CPU build (its worker calls the CUDA-only "
                  "torch.cuda.Stream.priority_range and engine start-up fails); the offload arm runs only on a GPU "
                  "cluster. Its rendering, DRAM budget and metric parsing are tested offline (tests/test_servers.py)")


def _unavailable(profile: Profile, config: pytest.Config) -> str | None:
    """Why this profile cannot run here, or None."""
    cl = profile.cluster
    if cl.kind == "gpu":
        chosen = config.getoption("--cluster")
        if chosen != cl.name:
            return (f"needs cluster {cl.name} ({cl.gpus_per_node} x {cl.gpu_type.upper()} GPUs per node via "
                    f"Slurm); run on its login node with --cluster {cl.name}")
    elif profile.offload:
        return OFFLOAD_ON_CPU
    why = backend_for(cl.backend).unavailable()
    if why:
        return f"--cluster {cl.name} given, but {why}" if cl.kind == "gpu" else why
    return None


def _missing_tools(profile: Profile, config: pytest.Config) -> str | None:
    """Locally installed components a profile needs before nodes are worth allocating."""
    root = Path(config.rootpath)
    if profile.cluster.kind == "embedded":
        python = root / profile.cluster.runtime.python
        if not python.exists():
            return f"the serving venv is missing ({python}): run scripts/install-servers"
    aiperf = Path(config.getoption("--aiperf-bin"))
    aiperf = aiperf if aiperf.is_absolute() else root / aiperf
    if not aiperf.exists():
        return f"AIPerf is not installed at {aiperf}: run scripts/install-servers (or pass --aiperf-bin)"
    return None


@pytest.fixture
def point(request: pytest.FixtureRequest) -> Point:
    """The (profile, concurrency) point of this case."""
    return next(pt for pt in points(catalog(request.config)) if pt.id == request.param)


@pytest.fixture(scope="session")
def profile(request: pytest.FixtureRequest) -> Profile:
    """The profile of this case (session-scoped, keyed by profile id)."""
    return next(p for p in catalog(request.config).profiles if p.id == request.param)


@pytest.fixture(scope="session")
def allocation(profile: Profile, request: pytest.FixtureRequest):
    """The nodes of one profile, allocated once and shared by all its points; released between profiles."""
    reason = _unavailable(profile, request.config)
    if reason:
        pytest.skip(f"{profile.id}: {reason}")
    manifest = request.config.stash[_MANIFEST]
    request_ = request_for(profile, request.config.stash[_RUN_ID], request.config.getoption("--results-dir"))
    alloc: Allocation = backend_for(profile.cluster.backend).allocate(request_)
    entry = manifest.allocated(profile.id, alloc.describe())
    try:
        yield alloc
    finally:
        alloc.release()
        manifest.released(entry, alloc.describe())


def _results_dir(config: pytest.Config) -> Path:
    return Path(config.getoption("--results-dir")).resolve()


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
def deployment(profile: Profile, allocation: Allocation, request: pytest.FixtureRequest):
    """The running servers of one profile, started once and shared by all its concurrency points."""
    config = request.config
    missing = _missing_tools(profile, config)
    if missing:
        pytest.skip(f"{profile.id}: {missing}")
    work = _results_dir(config) / profile.id
    logs = work / "logs"
    model_dir = _model_dir(profile, config, logs)
    local = allocation.backend == "local" or profile.cluster.kind == "embedded"   # nodes share this host
    where = placement_for(profile, allocation.nodes, allocation.addresses(), str(work), root=str(config.rootpath),
                          model_dir=str(model_dir) if model_dir else None,
                          ports=_free_ports(config, len(allocation.nodes)) if local else Ports())
    server_plan = plan(profile, where)
    try:
        dep = deploy.start(profile, server_plan, allocation, logs, tokenizer_dir=model_dir)
    except (deploy.ServerError, ProcessDied) as err:
        pytest.fail(f"{profile.id}: servers did not come up: {err}", pytrace=False)
    deploy.dump(dep, work / "deployment.json")
    request.config.stash[_MANIFEST].server_started(profile.id, {
        "kind": server_plan.kind, "api_url": server_plan.api_url, "ready_seconds": round(dep.ready_seconds, 1),
        "engines": len(server_plan.engines), "versions": dep.versions})
    yield dep


@pytest.fixture
def measured(point: Point, profile: Profile, request: pytest.FixtureRequest, record_property) -> Measured:
    """This point's result: reused from --reuse-results when it matches, else measured with AIPerf against the
    profile's deployment (started on first use). The result is written before any assertion."""
    config = request.config
    out = None
    reuse_dir = config.getoption("--reuse-results")
    if reuse_dir:
        prior, why = reusable(point, Path(reuse_dir))
        if prior is not None:
            out = reuse(point, prior, Path(why), _results_dir(config))
            record_property("reused", str(out.reused_from))
        else:
            record_property("reuse_miss", why)
    if out is None:
        deployment = request.getfixturevalue("deployment")
        request.node.stash[_ALLOC] = deployment.allocation
        aiperf = Path(config.getoption("--aiperf-bin"))
        aiperf = aiperf if aiperf.is_absolute() else Path(config.rootpath) / aiperf
        progress = _status_line(config)
        try:
            out = measure(point, deployment, run_id=config.stash[_RUN_ID], results_dir=_results_dir(config),
                          aiperf_bin=str(aiperf), tokenizer_dir=deployment.tokenizer_dir, progress=progress)
        except (NotIdle, ProcessDied) as err:
            pytest.fail(f"{point.id}: {err}", pytrace=False)
    for name, value in summary.properties(out.result).items():
        record_property(name, value)
    return out


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


_BASELINE = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def baseline(request: pytest.FixtureRequest):
    """The --baseline file (read and checked once, at start-up), or None."""
    return request.config.stash.get(_BASELINE, None)
