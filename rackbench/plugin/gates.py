"""The ``--compare-run`` gate's evidence: this point against the same point of earlier runs of the history, with
the run-to-run noise of the cluster (this run is not in the history yet, so it never estimates its own noise)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rackbench.plugin.session import of
from rackbench.results import metrics as registry
from rackbench.results import requests as request_file
from rackbench.results.model import PointResult

if TYPE_CHECKING:        # the history (numpy with it) loads where a gate is asked for, not at every pytest start
    from rackbench.history.compare import Change

GATED = "output_tps_per_gpu"


def against(config: pytest.Config, r: PointResult, requests: Path) -> tuple[str, Change] | None:
    """(runs, change of output tok/s per GPU) against --compare-run's runs of the same point, or None; this point's
    requests from its own file (rackbench.results.requests), as the history's are."""
    key = config.getoption("--compare-run")
    return evidence(of(config).history, key, r, requests) if key else None


def evidence(history: Path, key: str, r: PointResult, requests: Path) -> tuple[str, Change] | None:
    """(runs, change of output tok/s per GPU) of point ``r`` (its requests file: ``requests``) against the runs
    ``key`` names in ``history``, or None where none of them measured the point."""
    from rackbench.history import queries, rows, store
    from rackbench.history.compare import compare_groups
    with closing(store.connect(history, create=False)) as con:
        runs = queries.resolve_runs(con, key)
        base = [p for run in runs if (p := rows.point(con, run, r.identity.case_id)) is not None]
        known = queries.noise(con, r.identity.cluster)
    if not base:
        return None
    mine = {**registry.values(r), "duration_s": r.throughput.duration_s, "gpus": r.throughput.gpus,
            "requests": [q for q in request_file.read(requests) if q.profiled] if requests.is_file() else []}
    return ", ".join(runs), compare_groups(base, [mine], metrics=(GATED,), noise=known.by_metric)[0]
