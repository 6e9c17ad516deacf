"""One object holds a pytest session's rackbench state: the catalog, the run id, the results folder, the manifest,
the baseline, the summary collector, each profile's run assembly and the end-of-session report. It is registered
as a plugin (``rackbench-session``); fixtures and hooks reach it with :func:`of`.
"""

from __future__ import annotations

import fcntl
import logging
import os
from contextlib import closing
from pathlib import Path

import pytest

from rackbench.catalog.loader import Catalog
from rackbench.catalog.points import Point, parse_allocation_key, points
from rackbench.cluster import Allocation, release_all
from rackbench.core.errors import ConfigError
from rackbench.core.files import disk_problem, link_atomic, write_atomic
from rackbench.core.names import new_run_id
from rackbench.core.report_folder import ReportFolder
from rackbench.core.results_folder import ResultsFolder
from rackbench.plugin.collector import Collector
from rackbench.recipe.profile import Profile
from rackbench.results.baseline import load as load_baseline
from rackbench.results.files import folder as results_folder
from rackbench.results.manifest import Manifest, merge

log = logging.getLogger(__name__)
NAME = "rackbench-session"
# The allocation a case ran on (for its failure report), stashed on the test item.
ALLOCATION = pytest.StashKey[Allocation]()


def of(config: pytest.Config) -> "RackbenchSession":
    return config.pluginmanager.get_plugin(NAME)


def claim_junit(xmlpath: str | None):
    """The --junitxml file, held for the session (an advisory lock on the file itself): a second session given the
    same file stops at once, naming it. pytest writes the file at the end, so before this the last session to end
    replaced the other's cases without a word. Returns the open file (None without --junitxml)."""
    if not xmlpath:
        return None
    path = Path(os.path.expandvars(os.path.expanduser(xmlpath))).resolve()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")
    except OSError as err:
        raise pytest.UsageError(f"--junitxml {xmlpath}: cannot write it ({err.strerror or err})") from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise pytest.UsageError(f"--junitxml {xmlpath}: another session is writing this file now; give each "
                                "session its own --junitxml (the last to end would replace the other's cases)") from None
    return fh


class RackbenchSession:
    def __init__(self, config: pytest.Config):
        self.config = config
        worker = getattr(config, "workerinput", None)
        # One run id shared by the controller and its xdist workers.
        self.run_id = worker["rackbench_run_id"] if worker else new_run_id()
        self.is_worker = worker is not None
        self.worker_id = worker["workerid"] if worker else None
        # Each session writes under its own run folder; `latest` (made by the controller) names the last one started.
        self.results = ResultsFolder.for_run(Path(config.getoption("--results-dir")).resolve(), self.run_id)
        self.manifest = Manifest(self.results, self.run_id, self.worker_id or "main")
        self.collector = Collector()
        self.baseline_file = config.getoption("--baseline")
        self.baseline: dict | None = None
        if self.baseline_file:
            try:   # a bad baseline stops the run before anything is allocated
                self.baseline = load_baseline(Path(self.baseline_file))
            except ValueError as err:
                raise pytest.UsageError(str(err)) from None
        if config.getoption("--compare-run"):   # an unknown run stops the session before anything is allocated
            from rackbench.history import queries, store
            try:
                with closing(store.connect(self.history, create=False)) as con:
                    queries.resolve_runs(con, config.getoption("--compare-run"))
            except ValueError as err:
                raise pytest.UsageError(f"--compare-run: {err}") from None
        if config.getoption("--reuse-results"):
            try:   # a points file that is bad is skipped (and the point runs); a folder that is not one stops here
                results_folder(config.getoption("--reuse-results"))
            except ValueError as err:
                raise pytest.UsageError(f"--reuse-results {err}") from None
        self._junit = None if self.is_worker else claim_junit(config.getoption("xmlpath", None))
        self._catalog: Catalog | None = None
        self._started = False
        self._assemblies: dict = {}
        self.merged: dict | None = None
        self.summary_path: Path | None = None
        self.report = None
        self.report_error: str | None = None
        self.held_line: str | None = None
        self.history_line: str | None = None
        self.disk_error: str | None = None
        self.report_note: str | None = None

    def start_run(self) -> None:
        """On the first point or allocation of this session (a session that measures nothing makes nothing): the
        run folder, and ``latest`` pointed at it."""
        if self._started:
            return
        self._started = True
        self.results.root.mkdir(parents=True, exist_ok=True)
        link_atomic(self.results.latest, self.results.run_link)

    @property
    def results_dir(self) -> Path:
        return self.results.root

    @property
    def history(self) -> Path:
        return Path(self.config.getoption("--history") or self.results.history)

    @property
    def recipes_dir(self) -> Path:
        return Path(self.config.getoption("--recipes") or Path(self.config.rootpath) / "recipes")

    def catalog(self) -> Catalog:
        """Loaded on first use; ConfigError (every problem of the catalog) if a recipe is broken."""
        if self._catalog is None:
            self._catalog = Catalog.load(self.recipes_dir)
        return self._catalog

    def points(self) -> list[Point]:
        return points(self.catalog())

    def point(self, case_id: str) -> Point:
        return next(pt for pt in self.points() if pt.id == case_id)

    def profile(self, profile_id: str) -> Profile:
        return next(p for p in self.catalog().profiles if p.id == profile_id)

    def assembly(self, profile: Profile, key: str | None = None):
        """The run assembly (allocate -> place -> plan -> deploy) of one allocation of a profile: ``key`` is the
        points' allocation key (rackbench.catalog.points.Point.allocation_key; the profile id when not split)."""
        from rackbench.server.assembly import Assembly   # here: its HTTP stack costs every pytest start otherwise
        key = key or profile.id
        self.start_run()
        if key not in self._assemblies:
            hook = self.config.hook.pytest_rackbench_allocation_request
            _, part = parse_allocation_key(key)
            self._assemblies[key] = Assembly(
                profile, self.results, self.run_id, root=Path(self.config.rootpath), xdist_worker=self.worker_id,
                adjust=lambda req: hook(profile=profile, request=req), part=part)
        return self._assemblies[key]

    @pytest.hookimpl(optionalhook=True)
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """What the catalog holds but rackbench does not run (srt-slurm recipes of other kinds), one line each."""
        try:
            cat = self.catalog()
        except ConfigError:
            return []           # collection reports the problems, once
        return [f"rackbench: not run: {file}: {why}" for file, why in sorted(cat.skipped.items())]

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._junit is not None:         # written by pytest by now; an empty one was never written: not left
            path = Path(self._junit.name)
            self._junit.close()
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()

    def pytest_configure_node(self, node) -> None:   # xdist, controller side
        node.workerinput["rackbench_run_id"] = self.run_id

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        # After pytest's own session finish, which tears down the remaining fixtures (so every release is in
        # the manifest) first.
        result = yield
        release_all()
        if self.is_worker:
            return result
        try:   # a full or read-only disk: one line naming the file and the cause, never a traceback over the cases
            if self.results.manifest_parts():
                self.merged = merge(self.results, self.run_id)
            if self.collector.measured():
                self.summary_path = write_atomic(self.results.summary,
                                                 "# rackbench results\n\n" + self.collector.markdown())
        except OSError as err:
            self.disk_error = f"{disk_problem(err) or err}; what was written before " \
                              f"is kept in {self.results.root}"
            log.error("%s", self.disk_error)
            return result
        if self.collector.measured() and not self.results.points.is_dir():
            self.report_note = "no point was stored in this run: no report, nothing added to the history"
        elif self.collector.measured():
            try:   # the report must never cost the run its results
                from rackbench.report import ab
                from rackbench.report import files as report_files
                from rackbench.report import gpuhours
                self.report = report_files.write(self.results_dir, only=self.collector.case_ids())
                self._junit_properties(ab.properties(self.report.ab))
                held = gpuhours.of_folder(self.results_dir, self.report.points)
                if held is not None:
                    self.held_line = gpuhours.line(held[1])
                    self._junit_properties(gpuhours.properties(held[1]))
            except Exception as err:  # noqa: BLE001
                log.exception("report failed")
                self.report_error = f"{type(err).__name__}: {err}"
            self._record_history()
        return result

    def _junit_properties(self, props: dict) -> None:
        """Session-wide properties in the junit XML (pytest's own junitxml plugin, when --junitxml is given)."""
        from _pytest.junitxml import xml_key
        xml = self.config.stash.get(xml_key, None)
        for name, value in props.items():
            if xml is not None:
                xml.add_global_property(name, value)

    def _record_history(self) -> None:
        """Every measured point goes into the results history (--history DB; --no-history to skip)."""
        if self.config.getoption("--no-history"):
            return
        try:   # like the report: never at the cost of the run's results
            from rackbench.history import store
            from rackbench.report import html
            added = store.add(self.history, self.results_dir, store.git_commit(Path(self.config.rootpath)))
            page = html.write(self.history, ReportFolder(self.results.report).html,
                              Path(self.config.rootpath) / "perf-changelog.yaml")
            self.history_line = f"history: {self.history}: {added.points} point(s) added; {page}"
        except Exception as err:  # noqa: BLE001
            log.exception("history add failed")
            self.history_line = f"history not updated: {type(err).__name__}: {err}"

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.disk_error:
            terminalreporter.write_sep("-", "rackbench")
            terminalreporter.write_line(f"results not written: {self.disk_error}", red=True)
        if self.merged:
            terminalreporter.write_sep("-", "rackbench")
            terminalreporter.write_line(
                f"{len(self.merged['allocations'])} allocation(s), {len(self.merged['server_starts'])} server "
                f"start(s); manifest: {self.results.manifest}")
            for alloc in self.merged["allocations"]:
                if alloc.get("release_error"):
                    terminalreporter.write_line(f"{alloc['profile']}: not released: {alloc['release_error']}",
                                                red=True)
        if self.summary_path:
            for line in self.collector.terminal_lines():
                terminalreporter.write_line(line)
            terminalreporter.write_line(f"summary table: {self.summary_path}; per-point results: "
                                        f"{self.results.points}")
            if self.report is not None:
                terminalreporter.write_line("report: " + ", ".join(str(f) for f in self.report.files))
                from rackbench.report.rank import terminal_lines
                for line in terminal_lines(self.results_dir):
                    terminalreporter.write_line(line)
            if self.report_note:
                terminalreporter.write_line(self.report_note)
            if self.report_error:
                terminalreporter.write_line(f"report failed: {self.report_error}", red=True)
            if self.held_line:
                terminalreporter.write_line(self.held_line)
            if self.history_line:
                terminalreporter.write_line(self.history_line)
