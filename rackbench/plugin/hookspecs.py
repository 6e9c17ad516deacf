"""Hooks a site implements (in its conftest.py or a plugin) to extend rackbench without forking it."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_rackbench_result_fields(point, result) -> dict | None:
    """Extra fields for one point's result, stored under ``result.extra`` (merged over every implementation).

    Called once per measured point, before the result is written; ``result`` is the
    :class:`rackbench.results.model.PointResult` built from AIPerf's files. Values must be JSON-serializable. An
    implementation that raises is logged and ignored: a site hook never costs a point its result."""


@pytest.hookspec(firstresult=True)
def pytest_rackbench_allocation_request(profile, request):
    """Adjust the Slurm (or local) allocation of a profile before it is submitted.

    ``request`` is the :class:`rackbench.cluster.AllocationRequest` rackbench derived from the recipe and the
    cluster; return a replacement (e.g. ``dataclasses.replace(request, scheduler=dataclasses.replace(
    request.scheduler, directives={..., "qos": "high"}))``) or
    None to keep it. The first implementation that returns a request wins."""


@pytest.hookspec
def pytest_rackbench_machine_info(profile, machine) -> dict | None:
    """Extra fields for the machine record of a profile's deployment, stored under ``result.machine.extra`` of every
    point it measures (merged over every implementation), as pytest-benchmark's ``machine_info`` hook.

    Called once per deployment, after rackbench recorded each host (``machine``: a list of node records, as
    rackbench/tools/machine_info.py prints them). An implementation that raises is logged and ignored."""
