"""The pytest plugin (entry point ``pytest11: rackbench``): recipes become cases, one deployment per profile.

* Markers come from the catalog: ``hardware``, ``local``, ``slurm``, ``offload`` and one per cluster
  ``gpu_type`` (``gb200``, ``h200``, ...), registered at start-up so ``--strict-markers`` accepts them.
* ``pytest_generate_tests`` turns every (profile, concurrency) of the catalog into one case of any test that
  asks for ``sb_point``, with a readable id, the profile's markers and ``xdist_group(<profile id>)`` (so under
  ``-n N --dist loadgroup`` a profile's points share one worker, hence one allocation).
* The fixtures (:mod:`rackbench.plugin.fixtures`) allocate once per profile, start servers once, measure per point.
* Sites extend it through the hooks in :mod:`rackbench.plugin.hookspecs`, and add cluster backends and load
  generators through entry points (rackbench.core.entry_points).
* A broken recipe fails collection with one message per problem, naming file, key and fix.
"""

from __future__ import annotations

import atexit
import os
import logging
import signal
import threading
from pathlib import Path

import pytest

from rackbench.catalog.clusters import load_clusters
from rackbench.cluster import Allocation, release_all
from rackbench.core.errors import ConfigError, Problem
from rackbench.core.former_name import stale_environment
from rackbench.recipe.schema.sweep import RUN_LENGTHS
from rackbench.core.files import copy_atomic, disk_problem
from rackbench.core.results_folder import CaseFolder
from rackbench.plugin import hookspecs
from rackbench.plugin.session import ALLOCATION, NAME, RackbenchSession, of
from rackbench.plugin.fixtures import speak_while_waiting
from rackbench.plugin.timeout import TIMED_OUT
from rackbench.plugin.rank import arm_marks, rank_cases, reference_first

pytest_plugins = ["rackbench.plugin.fixtures", "rackbench.plugin.search", "rackbench.plugin.rank",
                  "rackbench.plugin.timeout"]
log = logging.getLogger(__name__)

BASE_MARKERS = {
    "hardware": "needs a GPU cluster (never runs in CI; skipped with a reason when absent)",
    "local": "the embedded default benchmark on this machine (vLLM CPU, generated model)",
    "slurm": "needs a Slurm controller (CI starts a local one with scripts/slurm-local)",
    "offload": "the CPU KV-cache offload arm of a profile",
    "search": "a search for the highest concurrency meeting an SLO tier (profile.search): runs only when the -m or "
              "-k expression names `search`, so selecting a profile's points never starts its search too",
    "rank": "a ranking of deployments (recipes/rankings/) and its arms' searches: runs only when the -m or -k "
            "expression names `rank` (or `search`); `-m gb200 -k rank` selects the GB200 ranking",
}


def pytest_addhooks(pluginmanager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rackbench")
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
                         "(1 - profile.gates.baseline_tolerance); see `rackbench baseline`")
    group.addoption("--history", "--db", metavar="DB", dest="history",
                    help="record every measured point in this results history at the end (default: "
                         "<results-dir>/history.sqlite; --db as every `rackbench` command spells it; see "
                         "`rackbench history`, `rackbench compare`)")
    group.addoption("--compare-run", metavar="RUN",
                    help="also fail a point that is worse with confidence than the same point of these runs of the "
                         "history (output tok/s per GPU, 95%% interval; see `rackbench compare`)")
    group.addoption("--no-history", action="store_true", help="do not record this session's points in the history")
    group.addoption("--run-length", choices=RUN_LENGTHS, default=None,
                    help="every point's run-length rule, over its profile's load.stop.mode: fixed (duration_s), "
                         "adaptive (stop once the throughput is precise and steady) or decide (stop once the point's "
                         "SLO gate, or a search probe's tier, is met or missed with confidence); docs/load.md")
    group.addoption("--load-bin", "--aiperf-bin", dest="load_bin", metavar="PATH",
                    help="the load generator's executable (default: the generator's own: AIPerf's is $AIPERF_BIN "
                         "or .venvs/aiperf/bin/aiperf)")


def markers(recipes: Path) -> dict[str, str]:
    """Every marker a case of this catalog can carry: the base ones and one per cluster gpu_type. Read from the
    cluster files alone, so a broken profile still fails collection with its own message, not a marker error."""
    out = dict(BASE_MARKERS)
    problems: list[Problem] = []
    if recipes.is_dir():
        for cluster in load_clusters(recipes, problems).values():
            for name in cluster.markers:
                out.setdefault(name, f"a case of a profile on a {name.upper()} cluster (e.g. {cluster.name})")
    return out


def pytest_configure(config: pytest.Config) -> None:
    for line in stale_environment(os.environ):
        config.issue_config_time_warning(UserWarning(line), stacklevel=2)
    session = RackbenchSession(config)
    config.pluginmanager.register(session, NAME)
    config.pluginmanager.register(session.collector, "rackbench-summary")
    for name, text in markers(session.recipes_dir).items():
        config.addinivalue_line("markers", f"{name}: {text}")
    atexit.register(release_all)
    config.add_cleanup(speak_while_waiting(config))
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a CI cancel, scancel of the login job, a timeout wrapper) unwinds like Ctrl-C:
        # pytest then runs every fixture teardown, which releases allocations and stops processes.
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sb_search" in metafunc.fixturenames:
        _search_cases(metafunc)
        return
    if "sb_ranking" in metafunc.fixturenames:
        rank_cases(metafunc)
        return
    if "sb_point" not in metafunc.fixturenames:
        return
    session = of(metafunc.config)
    try:
        pts, broken = session.points(), None
    except ConfigError as err:
        pts, broken = [], f"invalid recipe(s):\n{err}"
    if broken:      # outside the except block: pytest shows the problem list once, not chained to itself
        pytest.fail(broken, pytrace=False)
    params = [pytest.param(pt.profile.id, pt.allocation_key, pt.id, id=pt.id,
                           marks=[*(getattr(pytest.mark, m) for m in pt.markers),
                                  pytest.mark.xdist_group(pt.allocation_key)])
              for pt in pts]
    # Both are indirect: the profile id (shared by a profile's points) is the cache key of the session-scoped
    # `sb_profile` fixture and of everything built on it (allocation, deployment), so pytest keeps them across
    # a profile's cases and tears them down only between profiles; the point id is unique per case.
    metafunc.parametrize(["sb_profile", "sb_allocation_key", "sb_point"], params, indirect=True, scope="session")


def _search_cases(metafunc: pytest.Metafunc) -> None:
    """One case per search profile, in the profile's one allocation (as its points would share it); a ranking's
    arms marked ``rank``, its reference arm first."""
    from rackbench.catalog.points import searches
    try:
        cat = of(metafunc.config).catalog()
        found = reference_first(cat.rankings, searches(cat))
    except ConfigError as err:
        pytest.fail(f"invalid recipe(s):\n{err}", pytrace=False)
    params = [pytest.param(p.id, p.id, f"{p.id}-search", id=f"{p.id}-search",
                           marks=[*(getattr(pytest.mark, m) for m in p.markers), pytest.mark.search,
                                  *arm_marks(cat.rankings, p.id), pytest.mark.xdist_group(p.id)])
              for p in found]
    metafunc.parametrize(["sb_profile", "sb_allocation_key", "sb_search_case"], params, indirect=True,
                         scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A search or a ranking runs only when asked for by name (`-m search`, `-k rank`, or an expression naming
    either): `-k dep_offload` selects that profile's points, not also the hours of its search profile."""
    said = f"{config.getoption('markexpr', '')} {config.getoption('keyword', '')}"
    def asked(item) -> bool:
        search, rank = item.get_closest_marker("search") is not None, item.get_closest_marker("rank") is not None
        if search:                      # a search, or an arm of a ranking (marked rank too)
            return "search" in said or "rank" in said
        return not rank or "rank" in said          # a ranking's own case
    keep = [i for i in items if asked(i)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if not asked(i)])
        items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """A failing case shows the log tail of every node process of its allocation that ended when it should not
    have (a one-shot step that exited 0 did its job; a tail the failure's message already shows is not repeated),
    and keeps a copy of every server log in its case directory."""
    report = yield
    callspec = getattr(item, "callspec", None)
    case = (callspec.params.get("sb_point") or callspec.params.get("sb_search_case")) if callspec is not None else None
    if case is not None:
        report.user_properties.append(("rackbench_case", case))
    disk = disk_problem(call.excinfo.value) if case is not None and call.excinfo is not None else None
    if disk is not None:     # a full or read-only results disk: one line per case, naming the file, no traceback
        report.longrepr = f"{case}: results not written: {disk}; what was written before is kept"
    alloc = getattr(item, "funcargs", {}).get("sb_allocation") or item.stash.get(ALLOCATION, None)
    if item.stash.get(TIMED_OUT, None) is not None:      # one line (rackbench.plugin.timeout); logs still kept
        report.longrepr = item.stash[TIMED_OUT]
        if case is not None and isinstance(alloc, Allocation) and report.failed:
            keep_logs(alloc.processes, of(item.config).results.case(callspec.params["sb_profile"], case))
        return report
    if report.failed and isinstance(alloc, Allocation):
        shown = str(report.longrepr or "")
        ended = [p for p in alloc.processes if p.popen is not None and not p.alive()]
        server_died = any(not p.oneshot for p in ended)
        for proc in ended:
            if proc.oneshot and (proc.popen.returncode == 0 or server_died):
                continue     # its job done, or a consequence of the server's death (the client's errors)
            if str(proc.log) not in shown:
                report.sections.append((f"{proc.name} on node {proc.node} exited ({proc.popen.returncode}); "
                                        f"tail of {proc.log}", proc.tail()))
        if case is not None:
            missed = keep_logs(alloc.processes, of(item.config).results.case(callspec.params["sb_profile"], case))
            if missed:
                report.sections.append(("server logs not copied into the case folder", "\n".join(missed)))
    return report


def keep_logs(processes, case: CaseFolder) -> list[str]:
    """A failing case keeps a copy of every server log as it was when it failed (the live logs go on), each copy
    whole or not at all; returns a line for each log it could not copy (why, and where the original still is)."""
    missed = []
    for proc in processes:
        try:
            copy_atomic(proc.log, case.server_log(proc.name, proc.rank))
        except OSError as err:
            log.warning("could not keep %s: %s", proc.log, err)
            missed.append(f"{disk_problem(err) or err}; the original is still {proc.log}")
    return missed
