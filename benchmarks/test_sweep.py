"""The benchmark: one case per (profile, concurrency) point of the recipe catalog.

The fixtures (servebench.plugin.fixtures) allocate the profile's nodes once, start its servers once, and run its
load generator (AIPerf) for this point; the result JSON is written before anything here can fail. This test only judges it: once, with the
verdict stored beside the numbers (so reports show what pytest decided).
"""


def test_point(sb_point, sb_measured, sb_judge):
    assert sb_measured.path.is_file(), f"no result JSON at {sb_measured.path} (expected one per point)"
    verdict = sb_judge(sb_measured)
    assert verdict.passed, f"{sb_point.id}: " + "\n".join(verdict.failures) + f"\nresult: {sb_measured.path}"


def test_search(sb_search_case, sb_search):
    """One search profile (profile.search): the highest concurrency meeting its SLO tier, found in one allocation."""
    assert not sb_search["not_measured"], f"{sb_search_case}: probes that did not measure:\n" + \
        "\n".join(sb_search["not_measured"])
    assert sb_search["answer"] is not None, (
        f"{sb_search_case}: no concurrency in {sb_search['range']} meets tier {sb_search['tier']}: {sb_search['why']}")
