"""A point's stored result: built from its measurement and written in both places reports read (the case folder
and ``points/``), reused from an earlier run when it may stand in, and re-written with its verdict."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from servebench.catalog.points import Point
from servebench.core.results_folder import ResultsFolder
from servebench.load.measure import Measurement
from servebench.results.build import build
from servebench.results.files import read, write
from servebench.results.model import PointResult, Verdict

log = logging.getLogger(__name__)
Extend = Callable[[PointResult], dict]


@dataclass(frozen=True)
class Stored:
    result: PointResult
    path: Path           # the result JSON in the case folder
    copy: Path           # the same file in points/, where reports read from
    reused_from: Path | None = None

    def with_verdict(self, verdict: Verdict) -> "Stored":
        """Store the case's verdict with the point (both copies, atomically)."""
        judged = self.result.model_copy(update={"verdict": verdict})
        write(self.path, judged)
        write(self.copy, judged)
        return Stored(judged, self.path, self.copy, self.reused_from)


def store(m: Measurement, folder: ResultsFolder, extend: Extend | None = None) -> Stored:
    """Build the point's result from its measurement, add the site's fields, write both copies."""
    result = build(m)
    if extend is not None:
        result = result.model_copy(update={"extra": extend(result)})
    path, copy = m.case.result, folder.point(m.point.id)
    write(path, result)
    write(copy, result)
    return Stored(result, path, copy)


def store_failed(m: Measurement, folder: ResultsFolder, cause: BaseException, extend: Extend | None = None
                 ) -> Stored | None:
    """Store what a failed run measured; if that fails too, the cause stays the error (this one is noted on it)."""
    try:
        return store(m, folder, extend)
    except Exception as err:  # noqa: BLE001 - the run's own failure is the one to report
        log.error("%s: the partial result could not be written: %s", m.point.id, err)
        cause.add_note(f"servebench: the partial result of {m.point.id} could not be written either: {err}")
        return None


@dataclass(frozen=True)
class Reusable:
    """What --reuse-results found for a point: a prior result and the file it came from, or why there is none."""

    prior: PointResult | None
    source: Path | None = None
    miss: str | None = None


def reusable(point: Point, reuse_dir: Path) -> Reusable:
    """A prior result for this point that may stand in for a new run, with its file; or none and why not."""
    path = ResultsFolder.at(reuse_dir).point(point.id)
    if not path.is_file():
        return Reusable(None, miss=f"no prior result at {path}")
    try:
        prior = read(path)
    except ValueError as err:
        return Reusable(None, miss=str(err))
    if prior.identity.recipe_fingerprint != point.profile.fingerprint:
        return Reusable(None, miss=f"{path} was measured with another recipe (fingerprint "
                                   f"{prior.identity.recipe_fingerprint[:12]} != {point.profile.fingerprint[:12]})")
    return Reusable(prior, path)


def reuse(point: Point, prior: PointResult, source: Path, folder: ResultsFolder) -> Stored:
    """Copy a prior result into this run's results (marked reused); it is judged anew, like a new one."""
    prior = prior.model_copy(update={"verdict": None})
    path, copy = folder.case(point.profile.id, point.id).result, folder.point(point.id)
    write(path, prior)
    write(copy, prior)
    return Stored(prior, path, copy, reused_from=Path(source))
