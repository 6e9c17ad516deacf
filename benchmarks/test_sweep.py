"""The benchmark: one case per (profile, concurrency) point of the recipe catalog.

The fixtures (servebench.plugin) allocate the profile's nodes once, start its servers once, and run AIPerf for
this point; the result JSON is written before anything here can fail. This test only judges it.
"""

from servebench.verdict import failures, judge


def test_point(point, measured, baseline):
    assert measured.path.is_file(), f"no result JSON at {measured.path} (expected one per point)"
    problems = failures(judge(measured.result, point.profile, baseline))
    assert not problems, f"{point.id}: " + "\n".join(problems) + f"\nresult: {measured.path}"
