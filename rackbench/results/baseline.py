"""Baseline gate: an accepted run's throughput per point, and the check that a new run did not drop below it.

A baseline file (JSON, ``rackbench/schemas/baseline.schema.json``) holds, per case id, the accepted output
tok/s per GPU and the recipe fingerprint it was measured with. ``rackbench baseline RESULTS --out FILE`` writes
one from a results directory; ``pytest --baseline FILE`` applies it.
"""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

from rackbench.core.files import read_json, write_json
from rackbench.results.files import load_points


def schema() -> dict:
    return json.loads(resources.files("rackbench").joinpath("schemas/baseline.schema.json").read_text())


def make(results_dir: Path, cluster: str | None = None, dropped: dict[str, str] | None = None,
         hint: str | None = None) -> dict:
    """The baseline of a results folder; ``dropped`` receives each file or point left out and why. Without
    ``cluster``, the folder's one cluster, else ``hint`` where it names one of them (the output file's name:
    ``baselines/local-cpu.json``)."""
    dropped = {} if dropped is None else dropped
    points, rejected = load_points(results_dir)
    dropped.update(rejected)
    clusters = sorted({r.identity.cluster for r in points})
    if cluster is None:
        if len(clusters) != 1 and hint not in clusters:
            raise ValueError(f"{results_dir} holds results of {len(clusters)} clusters ({', '.join(clusters)})"
                             f"; pass --cluster with one of them, or name the output after one "
                             f"(--out baselines/{clusters[0]}.json)" if clusters else
                             f"{results_dir} holds no result to make a baseline of")
        cluster = clusters[0] if len(clusters) == 1 else hint
    chosen = []
    for r in points:
        name = f"{r.identity.case_id}.json"
        if r.identity.cluster != cluster:
            dropped[name] = f"cluster {r.identity.cluster}, not {cluster}"
        elif not r.throughput.output_tps_per_gpu or not r.requests.successful:
            dropped[name] = "no successful requests / no throughput to hold later runs to"
        else:
            chosen.append(r)
    return {"schema_version": 1, "cluster": cluster, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": str(results_dir),
            "points": {r.identity.case_id: {"output_tps_per_gpu": r.throughput.output_tps_per_gpu,
                                            "recipe_fingerprint": r.identity.recipe_fingerprint,
                                            "run_id": r.identity.run_id} for r in chosen}}


def write(data: dict, path: Path) -> None:
    if Path(path).is_dir():
        raise ValueError(f"--out {path}: a folder; give the baseline file's name, e.g. {Path(path) / 'baseline.json'}")
    import jsonschema
    jsonschema.validate(data, schema())
    write_json(Path(path), data)


def load(path: Path) -> dict:
    try:
        data = read_json(path)
    except ValueError as err:
        raise ValueError(f"--baseline {err}; write one with `rackbench baseline`") from None
    import jsonschema
    errors = list(jsonschema.Draft202012Validator(schema()).iter_errors(data))
    if errors:
        raise ValueError(f"--baseline {path}: {errors[0].message} at {'/'.join(map(str, errors[0].absolute_path))}")
    return data
