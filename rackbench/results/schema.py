"""The result file's JSON Schema: generated from the result model (rackbench.results.model.PointResult), checked
in at ``rackbench/schemas/result.schema.json`` for consumers that do not run Python (``rackbench schema
--write``; a test fails when the checked-in file is stale)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from rackbench.results.model import SCHEMA_ID, PointResult
CHECKED_IN = "schemas/result.schema.json"


def json_schema() -> dict:
    body = PointResult.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **body}


def text() -> str:
    return json.dumps(json_schema(), indent=1, sort_keys=False) + "\n"


def checked_in_path() -> Path:
    return Path(str(resources.files("rackbench").joinpath(CHECKED_IN)))


def checked_in() -> str:
    return resources.files("rackbench").joinpath(CHECKED_IN).read_text()


def file_problems(path: Path) -> list[str]:
    """How a written result file breaks the checked-in JSON Schema (the contract its consumers read)."""
    return problems(json.loads(Path(path).read_text()))


def problems(data) -> list[str]:
    """How a result's JSON form breaks the checked-in JSON Schema."""
    import jsonschema      # here, not at import: jsonschema and its referencing stack cost every pytest start

    validator = jsonschema.Draft202012Validator(json.loads(checked_in()))
    return [f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
            for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))]
