"""The benchmark: one case per (profile, concurrency) point of the recipe catalog.

The fixtures (rackbench.plugin.fixtures) allocate the profile's nodes once, start its servers once, and run its
load generator (AIPerf) for this point; the result JSON is written before anything here can fail. This test only judges it: once, with the
verdict stored beside the numbers (so reports show what pytest decided).
"""


def test_point(sb_point, sb_measured, sb_judge):
    assert sb_measured.path.is_file(), f"no result JSON at {sb_measured.path} (expected one per point)"
    verdict = sb_judge(sb_measured)
    assert verdict.passed, f"{sb_point.id}: " + "\n".join(verdict.failures) + f"\nresult: {sb_measured.path}"


def test_search(sb_search_case, sb_profile, sb_search):
    """One search profile (profile.search): the highest concurrency meeting its SLO tier, found in one allocation.
    Every probe must have measured; "no concurrency in the range meets the tier" is an answer, and fails the case
    only where the profile declares the least it must be (search.at_least)."""
    assert not sb_search["not_measured"], f"{sb_search_case}: probes that did not measure:\n" + \
        "\n".join(sb_search["not_measured"])
    floor = sb_profile.spec.search.at_least
    assert floor is None or (sb_search["answer"] or 0) >= floor, (
        f"{sb_search_case}: the answer is {sb_search['answer'] or 'no concurrency'} in {sb_search['range']} meeting "
        f"tier {sb_search['tier']}, below search.at_least c{floor}: {sb_search['why']}")


def test_rank(sb_ranking):
    """One ranking (recipes/rankings/): its arms' searches, run before it in this session, ranked per GPU for its
    tier with a verdict per pair; "cannot rank" names why. Fails when an arm stored no search (the fixture says
    which), or when a ranked pair has no interval or a refused pair no reason."""
    for p in sb_ranking["pairs"]:
        assert p["verdict"] in ("better", "worse", "within noise", "cannot rank"), p
        assert (p["verdict"] == "cannot rank") == ("interval" not in p), p
        assert p["verdict"] != "cannot rank" or p["why"], p
    assert sorted(sb_ranking["order"]) == sorted(sb_ranking["arms"]), (
        f"{sb_ranking['ranking']}: arms without a search answer in the ranking: {sb_ranking['order']}")
