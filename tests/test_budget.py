"""The time budget of one allocation (servebench.catalog.budget): the expected time the rule and the split use, and
beside it the bound, every timeout of the suite's own reached, which is what a job's time limit must cover for the
suite, not Slurm, to end what runs long."""

import inspect

from servebench.catalog import budget as b
from tests.conftest import by_id, run_cli


def test_the_bound_is_the_sum_of_the_suites_own_timeouts(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep_offload")
    got = b.budget(prof)
    load, n = prof.spec.load, len(prof.spec.concurrency)
    ready = prof.recipe.health_check.max_attempts * prof.recipe.health_check.interval_seconds
    release = 3 * (prof.spec.stop_grace_s + 10)
    point = load.duration_s + load.warmup_grace_s + 900
    assert got.held_s() == got.load_s + load.dataset_timeout_s + n * point          # the expected time, as before
    assert got.bound_s() == ready + 900 + 120 + release + load.dataset_timeout_s + n * (point + load.idle_wait_s + 180)
    assert got.bound_s() > got.limit_s > got.held_s()         # the seed's 12 h covers the expected time, not the bound
    line = run_cli("render", "kimi-k3-gb200-dep_offload-c128").stdout
    assert f"at most {b.human(got.bound_s())} if every timeout is reached (readiness 6.0 h" in line
    assert "past the limit, so a slow readiness or a stuck point ends the job before the suite's own timeouts do" in line


def test_each_timeout_the_bound_counts_is_the_one_the_suite_waits_with():
    """One owner: change a timeout where it is used and the bound follows, or this fails."""
    from servebench.cluster import slurm
    from servebench.cluster.base import STOP_TIERS
    from servebench.load import generator, measure
    from servebench.server import mounts, preflight
    assert measure.GRACE_S is b.STOP_MARGIN_S and generator.INTERRUPT_GRACE_S is b.INTERRUPT_GRACE_S
    assert inspect.signature(preflight.run).parameters["timeout"].default == b.PREFLIGHT_TIMEOUT_S
    assert inspect.signature(mounts.missing).parameters["timeout"].default == b.MOUNTS_TIMEOUT_S
    assert slurm.KILL_WAIT_S is b.KILL_WAIT_S
    assert len(STOP_TIERS) == b.RELEASE_TIERS
