"""A point's stored result: built from its measurement and written in both places reports read (the case folder
and ``points/``) beside its requests in rackbench's own form (rackbench.results.requests), reused from an earlier
run when it may stand in, and re-written with its verdict."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rackbench.catalog.points import Point
from rackbench.core.results_folder import ResultsFolder
from rackbench.load.measure import Measurement
from rackbench.results import requests as request_file
from rackbench.results.build import build
from rackbench.results.files import read, write
from rackbench.results.model import PointResult, Verdict

log = logging.getLogger(__name__)
Extend = Callable[[PointResult], dict]


@dataclass(frozen=True)
class Stored:
    result: PointResult
    path: Path           # the result JSON in the case folder
    copy: Path           # the same file in points/, where reports read from
    requests: Path       # its requests (rackbench.results.requests), in the case folder
    reused_from: Path | None = None

    def with_verdict(self, verdict: Verdict) -> "Stored":
        """Store the case's verdict with the point (both copies, atomically)."""
        judged = self.result.model_copy(update={"verdict": verdict})
        write(self.path, judged)
        write(self.copy, judged)
        return Stored(judged, self.path, self.copy, self.requests, self.reused_from)


def store(m: Measurement, folder: ResultsFolder, extend: Extend | None = None) -> Stored:
    """Build the point's result from its measurement, add the site's fields, write both copies."""
    result = build(m)
    if extend is not None:
        result = result.model_copy(update={"extra": extend(result)})
    path, copy = m.case.result, folder.point(m.point.id)
    request_file.write(m.case.requests, m.records.requests)
    write(path, result)
    write(copy, result)
    return Stored(result, path, copy, m.case.requests)


def store_failed(m: Measurement, folder: ResultsFolder, cause: BaseException, extend: Extend | None = None
                 ) -> Stored | None:
    """Store what a failed run measured; if that fails too, the cause stays the error (this one is noted on it)."""
    try:
        return store(m, folder, extend)
    except Exception as err:  # noqa: BLE001 - the run's own failure is the one to report
        log.error("%s: the partial result could not be written: %s", m.point.id, err)
        cause.add_note(f"rackbench: the partial result of {m.point.id} could not be written either: {err}")
        return None


@dataclass(frozen=True)
class Reusable:
    """What --reuse-results found for a point: a prior result and the file it came from, or why there is none."""

    prior: PointResult | None
    source: Path | None = None
    miss: str | None = None
    requests: Path | None = None     # its requests file, where the prior run kept one


def reusable(point: Point, reuse_dir: Path) -> Reusable:
    """A prior result for this point that may stand in for a new run, with its file; or none and why not."""
    prior_folder = ResultsFolder.at(reuse_dir)
    path = prior_folder.point(point.id)
    if not path.is_file():
        return Reusable(None, miss=f"no prior result at {path}")
    try:
        prior = read(path)
    except ValueError as err:
        return Reusable(None, miss=str(err))
    if prior.identity.recipe_fingerprint != point.profile.fingerprint:
        return Reusable(None, miss=f"{path} was measured with another recipe (fingerprint "
                                   f"{prior.identity.recipe_fingerprint[:12]} != {point.profile.fingerprint[:12]})")
    requests = prior_folder.case(point.profile.id, point.id).requests
    return Reusable(prior, path, requests=requests if requests.is_file() else None)


def reuse(point: Point, found: Reusable, folder: ResultsFolder) -> Stored:
    """Copy a prior result and its requests into this run's results (marked reused); it is judged anew, like a new
    one."""
    prior = found.prior.model_copy(update={"verdict": None})
    case = folder.case(point.profile.id, point.id)
    path, copy = case.result, folder.point(point.id)
    if found.requests is not None:
        request_file.write(case.requests, request_file.read(found.requests))
    write(path, prior)
    write(copy, prior)
    return Stored(prior, path, copy, case.requests, reused_from=Path(found.source))
