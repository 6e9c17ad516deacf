"""What rackbench writes outside a results folder's own layout (rackbench.core.results_folder): a report's files
(``<results>/report`` unless ``--out`` names another folder) and an export in another tool's format. Every name that
becomes part of a path passes :func:`rackbench.core.names.name` first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rackbench.core.names import name


@dataclass(frozen=True)
class ReportFolder:
    """What ``rackbench report`` writes (``<results>/report`` unless --out names another folder)."""

    root: Path

    @property
    def markdown(self) -> Path:
        return self.root / "report.md"

    @property
    def csv(self) -> Path:
        return self.root / "points.csv"

    @property
    def html(self) -> Path:
        return self.root / "report.html"

    def pareto(self, model: str, cluster: str) -> Path:
        return self.root / f"pareto-{name(model, 'model')}-{name(cluster, 'cluster')}.png"

    def offload_ab(self, base: str, offload: str) -> Path:
        return self.root / f"offload-ab-{name(offload, 'profile id')}-vs-{name(base, 'profile id')}.png"

    def point_plot(self, case_id: str) -> Path:
        return self.root / f"series-{name(case_id, 'case id')}.png"

    def search_plot(self, profile_id: str) -> Path:
        return self.root / f"search-{name(profile_id, 'profile id')}.png"


@dataclass(frozen=True)
class ExportFolder:
    """What ``rackbench export --inferencex DIR`` writes: one aggregate per point, and their list."""

    root: Path

    def point(self, case_id: str) -> Path:
        return self.root / f"{name(case_id, 'case id')}.json"

    def aggregate(self, experiment: str) -> Path:
        return self.root / f"agg_{name(experiment, 'experiment name')}.json"
