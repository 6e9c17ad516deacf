"""Result files and the points of a results folder: read strictly (a bad file is set aside with one line saying
why, never half-read), written atomically (a reader sees the old file or the new one)."""

from __future__ import annotations

import logging
from pathlib import Path

from rackbench.core.files import read_json, write_json
from rackbench.core.results_folder import ResultsFolder
from rackbench.results.model import PointResult, parse, problems

log = logging.getLogger(__name__)


def read(path: Path) -> PointResult:
    """A result file; ValueError (one line: the file and what is wrong) if it is not a valid result."""
    data = read_json(path)
    found = problems(data)
    if found:
        raise ValueError(f"{path}: not a rackbench result ({'; '.join(found[:3])})")
    return parse(data)


def write(path: Path, result: PointResult) -> Path:
    """Atomically; NaN or infinity never reach the file."""
    return write_json(path, result.dump())


def folder(results_dir: Path | str) -> ResultsFolder:
    """The results folder at ``results_dir``; ValueError (one line) when it is not one a session wrote."""
    found = ResultsFolder.at(results_dir)
    why = found.problem()
    if why:
        raise ValueError(why)
    return found


def load_points(results_dir: Path | str) -> tuple[list[PointResult], dict[str, str]]:
    """Every readable result of a results folder, and the files set aside with the reason (one line each)."""
    points, rejected = [], {}
    for path in sorted(folder(results_dir).points.glob("*.json")):
        try:
            points.append(read(path))
        except ValueError as err:
            rejected[path.name] = str(err).removeprefix(f"{path}: ")
    return points, rejected


def stored_searches(results_dir: Path) -> list[dict]:
    """The searches a results folder holds (``searches/<profile>.json``); an unreadable one is skipped, said."""
    folder = ResultsFolder.at(results_dir).searches
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(read_json(path))
        except ValueError as err:
            log.warning("%s: not read (%s)", path, err)
    return out
