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

from .cluster import Allocation, backend_for, release_all
from .cluster.request import request_for
from .errors import ConfigError
from .manifest import Manifest, merge
from .matrix import Point, points
from .recipe import Catalog, Profile

_CATALOG = pytest.StashKey[Catalog]()
_RUN_ID = pytest.StashKey[str]()
_MANIFEST = pytest.StashKey[Manifest]()
_MERGED = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("servebench")
    group.addoption("--recipes", metavar="DIR", help="recipe catalog (default: <rootdir>/recipes)")
    group.addoption("--cluster", metavar="NAME",
                    help="run hardware cases of this cluster (e.g. gb200-nv); without it they are skipped")
    group.addoption("--results-dir", metavar="DIR", default="results",
                    help="where per-point results, logs and reports go (default: results)")


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
    alloc = getattr(item, "funcargs", {}).get("allocation")
    if report.failed and isinstance(alloc, Allocation):
        for proc in alloc.processes:
            if not proc.alive():
                report.sections.append((f"{proc.name} on node {proc.node} exited ({proc.popen.returncode}); "
                                        f"tail of {proc.log}", proc.tail()))
    return report


def _unavailable(profile: Profile, config: pytest.Config) -> str | None:
    """Why this profile cannot get nodes here, or None."""
    cl = profile.cluster
    if cl.kind == "gpu":
        chosen = config.getoption("--cluster")
        if chosen != cl.name:
            return (f"needs cluster {cl.name} ({cl.gpus_per_node} x {cl.gpu_type.upper()} GPUs per node via "
                    f"Slurm); run on its login node with --cluster {cl.name}")
    why = backend_for(cl.backend).unavailable()
    if why and cl.kind == "gpu":
        return f"--cluster {cl.name} given, but {why}"
    return why


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


@pytest.fixture(scope="session")
def deployment(profile: Profile, allocation: Allocation):
    """The running servers of one profile, shared by all its concurrency points."""
    pytest.skip(f"{profile.id}: nodes allocated ({allocation.backend} job {allocation.job_id}), but starting "
                "servers from recipes is not implemented yet (issue #4)")
