"""One object holds a pytest session's servebench state: the catalog, the run id, the manifest, the baseline,
the summary collector and the end-of-session report. It is registered as a plugin (``servebench-session``);
fixtures and hooks reach it with :func:`of`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from . import history, html_report
from . import report as report_mod
from .baseline import load as load_baseline
from .catalog import Catalog
from .errors import ConfigError
from .cluster import Allocation, release_all
from .manifest import Manifest, merge
from .matrix import Point, points
from .profile import Profile
from .summary import Collector

log = logging.getLogger(__name__)
NAME = "servebench-session"
# The allocation a case ran on (for its failure report), stashed on the test item.
ALLOCATION = pytest.StashKey[Allocation]()


def of(config: pytest.Config) -> "ServebenchSession":
    return config.pluginmanager.get_plugin(NAME)


class ServebenchSession:
    def __init__(self, config: pytest.Config):
        self.config = config
        worker = getattr(config, "workerinput", None)
        # One run id shared by the controller and its xdist workers.
        self.run_id = worker["servebench_run_id"] if worker else time.strftime("%Y%m%d-%H%M%S-") + f"{os.getpid()}"
        self.is_worker = worker is not None
        self.results_dir = Path(config.getoption("--results-dir")).resolve()
        self.manifest = Manifest(self.results_dir, self.run_id, worker["workerid"] if worker else "main")
        self.collector = Collector()
        self.baseline_file = config.getoption("--baseline")
        self.baseline: dict | None = None
        if self.baseline_file:
            try:   # a bad baseline stops the run before anything is allocated
                self.baseline = load_baseline(Path(self.baseline_file))
            except ValueError as err:
                raise pytest.UsageError(str(err)) from None
        compare_run = config.getoption("--compare-run")
        if compare_run:   # an unknown run stops the session before anything is allocated
            from contextlib import closing
            db = config.getoption("--history") or str(self.results_dir / "history.sqlite")
            try:
                with closing(history.connect(db)) as con:
                    history.resolve_runs(con, compare_run)
            except ValueError as err:
                raise pytest.UsageError(f"--compare-run: {db}: {err}") from None
        reuse = config.getoption("--reuse-results")
        if reuse:
            try:   # a points file that is bad is skipped (and the point runs); a folder that is not one stops here
                report_mod.points_folder(Path(reuse))
            except ValueError as err:
                raise pytest.UsageError(f"--reuse-results {err}") from None
        self._catalog: Catalog | None = None
        self.merged: dict | None = None
        self.summary_path: Path | None = None
        self.report: report_mod.Report | None = None
        self.report_error: str | None = None
        self.history_line: str | None = None

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

    @pytest.hookimpl(optionalhook=True)
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """What the catalog holds but servebench does not run (srt-slurm recipes of other kinds), one line each."""
        try:
            cat = self.catalog()
        except ConfigError:
            return []           # collection reports the problems, once
        return [f"servebench: not run: {file}: {why}" for file, why in sorted(cat.skipped.items())]

    def pytest_configure_node(self, node) -> None:   # xdist, controller side
        node.workerinput["servebench_run_id"] = self.run_id

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        # After pytest's own session finish, which tears down the remaining fixtures (so every release is in
        # the manifest) first.
        result = yield
        release_all()
        if self.is_worker:
            return result
        if any(self.results_dir.glob("manifest.*.json")):
            self.merged = merge(self.results_dir, self.run_id)
        if self.collector.measured():
            self.summary_path = self.results_dir / "summary.md"
            self.summary_path.parent.mkdir(parents=True, exist_ok=True)
            self.summary_path.write_text("# servebench results\n\n" + self.collector.markdown())
            try:   # the report must never cost the run its results
                self.report = report_mod.write(self.results_dir,
                                               only={r["case_id"] for r in self.collector.measured()})
            except Exception as err:  # noqa: BLE001
                log.exception("report failed")
                self.report_error = f"{type(err).__name__}: {err}"
            self._record_history()
        return result

    def _record_history(self) -> None:
        """Every measured point goes into the results history (--history DB; --no-history to skip)."""
        if self.config.getoption("--no-history"):
            return
        db = self.config.getoption("--history") or str(self.results_dir / "history.sqlite")
        try:   # like the report: never at the cost of the run's results
            added = history.add(db, self.results_dir, history.git_commit(Path(self.config.rootpath)))
            page = html_report.write(db, self.results_dir / "report" / "report.html",
                                     Path(self.config.rootpath) / "perf-changelog.yaml")
            self.history_line = f"history: {db}: {added.points} point(s) added; {page}"
        except Exception as err:  # noqa: BLE001
            log.exception("history add failed")
            self.history_line = f"history not updated: {type(err).__name__}: {err}"

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.merged:
            terminalreporter.write_sep("-", "servebench")
            terminalreporter.write_line(
                f"{len(self.merged['allocations'])} allocation(s), {len(self.merged['server_starts'])} server "
                f"start(s); manifest: {self.results_dir / 'manifest.json'}")
        if self.summary_path:
            for line in self.collector.terminal_lines():
                terminalreporter.write_line(line)
            terminalreporter.write_line(f"summary table: {self.summary_path}; per-point results: "
                                        f"{self.results_dir / 'points'}")
            if self.report is not None:
                terminalreporter.write_line("report: " + ", ".join(str(f) for f in self.report.files))
            if self.report_error:
                terminalreporter.write_line(f"report failed: {self.report_error}", red=True)
            if self.history_line:
                terminalreporter.write_line(self.history_line)

