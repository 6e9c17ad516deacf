"""The ``--compare-run`` gate's evidence: this point against the same point of earlier runs of the history, with
the run-to-run noise of the cluster (this run is not in the history yet, so it never estimates its own noise)."""

from __future__ import annotations

from contextlib import closing

import pytest

from servebench.history import queries, store
from servebench.history.compare import Change, compare_groups
from servebench.load.generator import generator_for
from servebench.plugin.session import of
from servebench.results import metrics as registry
from servebench.results.model import PointResult
from pathlib import Path

GATED = "output_tps_per_gpu"


def against(config: pytest.Config, r: PointResult) -> tuple[str, Change] | None:
    """(runs, change of output tok/s per GPU) against --compare-run's runs of the same point, or None."""
    key = config.getoption("--compare-run")
    if not key:
        return None
    session = of(config)
    with closing(store.connect(session.history, create=False)) as con:
        runs = queries.resolve_runs(con, key)
        base = [p for run in runs if (p := store.point(con, run, r.identity.case_id)) is not None]
        known = queries.noise(con, r.identity.cluster)
    if not base:
        return None
    mine = {**registry.values(r), "duration_s": r.throughput.duration_s, "gpus": r.throughput.gpus,
            "requests": [q.row() for q in generator_for(r.run.generator).records(Path(r.run.artifact_dir)).profiled]}
    return ", ".join(runs), compare_groups(base, [mine], metrics=(GATED,), noise=known.by_metric)[0]
