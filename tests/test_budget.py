"""The time budget of one allocation (rackbench.catalog.budget): the expected time the rule and the split use, and
beside it the bound, every timeout of the suite's own reached, which is what a job's time limit must cover for the
suite, not Slurm, to end what runs long."""

import dataclasses
import inspect

import pytest

from rackbench.catalog import budget as b
from tests.conftest import by_id, run_cli


def test_the_bound_is_the_sum_of_the_suites_own_timeouts(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep_offload")
    got = b.budget(prof)
    load, n = prof.spec.load, len(prof.spec.concurrency)
    ready = prof.recipe.health_check.max_attempts * prof.recipe.health_check.interval_seconds
    release = 3 * (prof.spec.stop_grace_s + 10)
    point = load.duration_s + load.warmup_grace_s + 900
    assert got.held_s() == got.load_s + load.dataset_timeout_s + n * point          # the expected time, as before
    assert got.bound_s() == ready + 900 + 120 + release + load.dataset_timeout_s + n * (point + load.idle_wait_s + 1800 + 180)
    assert got.bound_s() > got.limit_s > got.held_s()         # the seed's 12 h covers the expected time, not the bound
    line = run_cli("render", "kimi-k3-gb200-dep_offload-c128").stdout
    assert f"at most {b.human(got.bound_s())} if every timeout is reached (readiness 6.0 h" in line
    assert "past the limit, so a slow readiness or a stuck point ends the job before the suite's own timeouts do" in line


def test_each_timeout_the_bound_counts_is_the_one_the_suite_waits_with():
    """One owner: change a timeout where it is used and the bound follows, or this fails."""
    from rackbench.cluster import slurm
    from rackbench.cluster.base import STOP_TIERS
    from rackbench.load import generator, measure
    from rackbench.server import mounts, preflight
    assert measure.GRACE_S is b.STOP_MARGIN_S and generator.INTERRUPT_GRACE_S is b.INTERRUPT_GRACE_S
    assert generator.CLIENT_SETUP_S is b.CLIENT_SETUP_S
    assert inspect.signature(preflight.run).parameters["timeout"].default == b.PREFLIGHT_TIMEOUT_S
    assert inspect.signature(mounts.missing).parameters["timeout"].default == b.MOUNTS_TIMEOUT_S
    assert slurm.KILL_WAIT_S is b.KILL_WAIT_S
    assert len(STOP_TIERS) == b.RELEASE_TIERS


SCONTROL = (  # `scontrol show partition -o` (Slurm 22.05), cut to the fields that matter
    "PartitionName=debug AllowGroups=ALL Default=YES QoS=N/A DefaultTime=NONE MaxNodes=UNLIMITED MaxTime=UNLIMITED "
    "State=UP TotalNodes=4\n"
    "PartitionName=shared AllowGroups=ALL Default=NO QoS=N/A DefaultTime=00:30:00 MaxTime=UNLIMITED State=UP\n"
    "PartitionName=batch AllowGroups=ALL Default=NO QoS=N/A DefaultTime=NONE MaxTime=2-00:00:00 State=UP\n")


def test_the_limit_a_job_without_time_gets_is_the_partitions_default_else_its_maximum():
    from rackbench.cluster.slurm import partition_limit
    assert partition_limit(SCONTROL, "shared") == "00:30:00"
    assert partition_limit(SCONTROL, "batch") == "2-00:00:00"
    assert partition_limit(SCONTROL, "debug") is None and partition_limit(SCONTROL, None) is None   # the default
    assert partition_limit(SCONTROL, "absent") is None


@pytest.mark.slurm
def test_a_recipe_without_a_time_limit_is_refused_where_the_partitions_default_is_shorter(catalog, slurm, tmp_path):
    """The seed's dep_offload needs ~10.6 h; without slurm.time_limit the partition's default applies (scripts/slurm-
    local's `shared` partition has DefaultTime=00:30:00, as sites set one), and the job would end mid-sweep. Read
    from the real scontrol, refused before anything is allocated; with the recipe's own limit the rule judges."""
    from rackbench.core.results_folder import ResultsFolder
    from rackbench.server.assembly import Assembly
    from rackbench.server.preflight import retarget
    assert slurm.default_time_limit("shared") == "00:30:00" and slurm.default_time_limit("debug") is None
    prof = retarget(by_id(catalog, "kimi-k3-gb200-dep_offload"), catalog.clusters["gb200-local"])
    recipe = prof.recipe.model_copy(update={"slurm": prof.recipe.slurm.model_copy(update={"time_limit": None,
                                                                                          "partition": "shared"})})
    unlimited = dataclasses.replace(prof, recipe=recipe)

    def limit(profile):
        assembly = Assembly(profile, ResultsFolder.at(tmp_path), "RUN")
        return assembly.limit_problem(assembly.request())
    said = limit(unlimited)
    assert said == ("the recipe names no time limit, so partition shared's default 00:30:00 applies, and the "
                    f"allocation holds {b.budget(unlimited).describe()}: set slurm.time_limit to at least "
                    f"{b.clock(b.budget(unlimited).held_s())}")
    assert limit(prof) is None                                                            # the recipe's 12 h
    on_debug = dataclasses.replace(prof, recipe=recipe.model_copy(update={"slurm": recipe.slurm.model_copy(
        update={"partition": "debug"})}))
    assert limit(on_debug) is None                                                        # no default there
