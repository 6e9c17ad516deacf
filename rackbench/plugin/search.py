"""One pytest case per search profile (profile.search): inside the profile's one allocation and deployment, probe
concurrencies chosen as the verdicts come in (rackbench.results.search), each probe a point of its own (measured,
stored and judged as a grid point is), and store the answer beside the points.

The case passes when the search found a concurrency that meets its tier with confidence and every probe was a
measurement (its own server answered, the generator ran to its end, nothing stalled, its records whole); a probe
that misses the tier or cannot resolve it is what a search is for, not a failure.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pytest

from rackbench.catalog.points import Point
from rackbench.core.files import read_json, write_atomic
from rackbench.core.results_folder import ResultsFolder
from rackbench.history.store import requests_of
from rackbench.load.generator import LoadGenerator
from rackbench.load.measure import MeasurementFailed, measure
from rackbench.plugin.fixtures import _status_line, generator, site_fields
from rackbench.plugin.session import ALLOCATION, of
from rackbench.recipe.profile import Profile
from rackbench.recipe.schema.sweep import SloTier
from rackbench.results.model import parse
from rackbench.results.point import store, store_failed
from rackbench.results.schema import file_problems
from rackbench.results.search import Search, probe_of
from rackbench.results import slo
from rackbench.results.parts import SloTierResult
from rackbench.results.verdict import judge

log = logging.getLogger(__name__)
# the checks that say a probe measured what it claims; the others (error rate, floors, the SLO gate) are its answer
MEASURED = ("schema", "servers", "successful", "own_server", "records", "generator", "stall", "counters")


@pytest.fixture
def sb_search_case(request: pytest.FixtureRequest) -> str:
    """This search case's id (``<profile>-search``)."""
    return request.param


@pytest.fixture
def sb_search(sb_profile: Profile, sb_allocation_key: str, request: pytest.FixtureRequest, record_property) -> dict:
    """Run the profile's search in its deployment; returns the answer as stored (``searches/<profile>.json``)."""
    config = request.config
    session = of(config)
    session.start_run()
    dep = request.getfixturevalue("sb_deployment")
    request.node.stash[ALLOCATION] = dep.allocation
    answer = run(sb_profile, dep, session.results, session.run_id, generator(sb_profile, config),
                 progress=_status_line(config), run_length=config.getoption("run_length"),
                 extend=lambda point: site_fields(config, point),
                 shared=shared_limits(sb_profile, session.catalog().rankings, session.results))
    for p in answer["probes"]:
        record_property(f"probe_c{p['concurrency']}", f"{p['verdict']} {p['attainment']} [{p['low']}, {p['high']}]")
    record_property("search_answer", answer["answer"])
    record_property("search_bracket", json.dumps(answer["bracket"]))
    record_property("rackbench_probes", ",".join(p["case_id"] for p in answer["probes"]))
    return answer


def new_search(profile: Profile) -> Search:
    """The profile's search before its first probe: its concurrency range, tolerance and probe budget."""
    spec = profile.spec.search
    return Search(min(profile.spec.concurrency), max(profile.spec.concurrency), spec.tolerance, spec.max_probes)


def run(profile: Profile, dep, results: ResultsFolder, run_id: str, gen: LoadGenerator, progress=None,
        run_length: str | None = None, extend=None, shared: "Relative | None" = None) -> dict:
    """The search, probe by probe, in ``dep``; each probe stored and judged as a point. Returns the answer as it is
    stored (``searches/<profile>.json``), with ``not_measured``: the probes whose measurement checks failed. With
    ``search.relative`` the first probe runs its whole length and sets the tier's limits for every probe, itself
    included; with ``shared`` (a ranking's reference arm measured them: shared_limits) every probe is judged by those."""
    spec = profile.spec.search
    search = new_search(profile)
    not_measured: list[str] = []
    relative: Relative | None = shared
    answer = stored_answer(profile, search, results, relative)   # no probe yet: the file says which comes first
    while (conc := search.next()) is not None:
        point = Point(profile, conc)
        case = results.case(profile.id, point.id)
        goal = relative.tier if relative else profile.spec.slo[spec.tier] if spec.relative is None else None
        try:
            m = measure(point, dep, gen, case, run_id=run_id, progress=progress, run_length=run_length,
                        decide=slo.decider(spec.tier, goal, profile.topology.gpus) if goal else None)
        except MeasurementFailed as failed:
            store_failed(failed.measurement, results, failed.__cause__, extend(point) if extend else None)
            pytest.fail(f"{point.id}: the probe at c{conc} failed: {failed.__cause__}", pytrace=False)
        stored = store(m, results, extend(point) if extend else None)
        verdict = judge(stored.result, profile, schema_errors=file_problems(stored.path))
        stored = stored.with_verdict(verdict)
        if spec.relative is not None and relative is None:
            try:
                relative = Relative.of(profile, stored.result, m.records.profiled)
            except ValueError as err:
                pytest.fail(f"{point.id}: {err}", pytrace=False)
        judged = relative.judge(stored.result, m.records.profiled) if relative else None
        probe = probe_of(conc, stored.result, spec.tier, verdict.passed, judged)
        search.add(probe)
        not_measured += [f"{point.id}: {c.message.splitlines()[0]}" for c in verdict.checks
                         if c.name in MEASURED and not c.ok]
        log.info("%s: c%d %s", profile.id, conc, probe.verdict)
        answer = stored_answer(profile, search, results, relative)   # after each probe: a lost allocation keeps it
    return {**answer, "not_measured": not_measured}


@dataclass(frozen=True)
class Relative:
    """A search tier whose limits are multiples of the first probe's medians (profile.search.relative)."""
    name: str
    tier: SloTier
    reference: dict

    @classmethod
    def of(cls, profile: Profile, first, requests: list) -> "Relative":
        spec = profile.spec.search
        tier, ref = slo.relative_tier(profile.spec.slo[spec.tier], spec.relative, requests)
        return cls(spec.tier, tier, {**ref, "case_id": first.identity.case_id,
                                     "multiples": spec.relative.model_dump(exclude_none=True)})

    @classmethod
    def from_answer(cls, answer: dict, reference: str) -> "Relative":
        """The limits another search of the same tier measured (its stored answer), to judge this one by."""
        tier = SloTier(**answer["limits"], attainment=answer["target"])
        return cls(answer["tier"], tier, {**answer["relative"], "from": reference})

    def judge(self, result, requests: list) -> SloTierResult:
        """The probe's tier judged by these limits, at the confidence its stored tier was judged at."""
        stored = next((x for x in result.slo if x.tier == self.name), None)
        return SloTierResult.model_validate(slo.tier_result(
            self.name, self.tier, requests, result.throughput.duration_s, result.throughput.gpus,
            confidence=stored.confidence if stored else 0.95))


def stored_answer(profile: Profile, search: Search, results: ResultsFolder, relative: Relative | None) -> dict:
    """The search's answer as far as its probes go, written (atomically) to ``searches/<profile>.json``."""
    spec = profile.spec.search
    goal = relative.tier if relative else profile.spec.slo[spec.tier]
    answer = {"profile": profile.id, "tier": spec.tier,
              "limits": goal.limits if relative or spec.relative is None else None, "target": goal.attainment,
              "relative": relative.reference if relative else None,
              "range": [search.lo, search.hi], "tolerance": spec.tolerance, **search.answer()}
    write_atomic(results.search(profile.id), json.dumps(answer, indent=1) + "\n")
    return answer


def shared_limits(profile: Profile, rankings: list, results: ResultsFolder) -> Relative | None:
    """The limits this profile's search is judged by where a ranking names another arm as its reference
    (rackbench.catalog.rankings) and that arm's search stored them in this results folder; None otherwise (the
    search then sets its own, and a ranking says the two arms' tiers differ)."""
    from rackbench.catalog.rankings import referenced
    ref = referenced(rankings, profile.id) if profile.spec.search.relative is not None else None
    path = results.search(ref) if ref else None
    if path is None or not path.is_file():
        if ref:
            log.warning("%s: its ranking's reference %s has no search in %s: its own first probe sets its limits, "
                        "and the ranking will say the two tiers differ (run the reference first)", profile.id, ref,
                        results.root)
        return None
    try:
        answer = read_json(path)
    except ValueError as err:           # torn or not JSON: said, and the search sets its own limits
        log.warning("%s: its reference's answer is not read (%s)", profile.id, err)
        return None
    if not answer.get("limits") or not answer.get("relative") or answer.get("tier") != profile.spec.search.tier:
        log.warning("%s: %s holds no relative limits of tier %s", profile.id, path, profile.spec.search.tier)
        return None
    return Relative.from_answer(answer, ref)


def replayed(profile: Profile, results: ResultsFolder) -> Search:
    """The search as its stored probes (``points/<probe>.json``) take it through the decision rule, probe after
    probe, up to the first concurrency the rule asks for that has no stored probe: the answer of a search whose
    allocation was lost before it ended (or one recorded before the answer was stored after each probe), and a check
    that a live search probed what the rule says. A relative tier is set again from the first stored probe."""
    tier = profile.spec.search.tier
    search = new_search(profile)
    relative: Relative | None = None
    while (conc := search.next()) is not None:
        path = results.point(Point(profile, conc).id)
        if not path.is_file():
            break
        result = parse(json.loads(path.read_text()))
        judged = None
        if profile.spec.search.relative is not None:
            requests, why = requests_of(results.root, result)
            if not requests:
                raise ValueError(f"{path}: no requests to judge a relative tier by ({why})")
            relative = relative or Relative.of(profile, result, requests)
            judged = relative.judge(result, requests)
        search.add(probe_of(conc, result, tier, result.verdict.passed if result.verdict else None, judged))
    return search
