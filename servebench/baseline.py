"""Baseline gate: an accepted run's throughput per point, and the check that a new run did not drop below it.

A baseline file (JSON, ``servebench/schemas/baseline.schema.json``) holds, per case id, the accepted output
tok/s per GPU and the recipe fingerprint it was measured with. ``servebench baseline RESULTS --out FILE`` writes
one from a results directory; ``pytest --baseline FILE`` applies it.
"""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

import jsonschema

from .report import load_points
from .yamlio import write_atomic


def schema() -> dict:
    return json.loads(resources.files("servebench").joinpath("schemas/baseline.schema.json").read_text())


def make(results_dir: Path, cluster: str | None = None) -> dict:
    points, _ = load_points(results_dir)
    clusters = sorted({r.identity.cluster for r in points})
    if cluster is None:
        if len(clusters) != 1:
            raise ValueError(f"{results_dir} holds results of {clusters or 'no'} cluster(s); pass --cluster")
        cluster = clusters[0]
    chosen = [r for r in points if r.identity.cluster == cluster
              and r.throughput.output_tps_per_gpu and r.requests.successful]
    return {"schema_version": 1, "cluster": cluster, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": str(results_dir),
            "points": {r.identity.case_id: {"output_tps_per_gpu": r.throughput.output_tps_per_gpu,
                                            "recipe_fingerprint": r.identity.recipe_fingerprint,
                                            "run_id": r.identity.run_id} for r in chosen}}


def write(data: dict, path: Path) -> None:
    jsonschema.validate(data, schema())
    write_atomic(Path(path), json.dumps(data, indent=1) + "\n")


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"--baseline {path}: cannot read it ({err}); write one with `servebench baseline`") from err
    errors = list(jsonschema.Draft202012Validator(schema()).iter_errors(data))
    if errors:
        raise ValueError(f"--baseline {path}: {errors[0].message} at {'/'.join(map(str, errors[0].absolute_path))}")
    return data
