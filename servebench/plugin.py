"""pytest hooks and fixtures: recipes become cases, one deployment per profile.

* ``pytest_generate_tests`` turns every (profile, concurrency) of the recipe catalog into one case of any
  test that asks for ``deployment`` and ``concurrency``, with a readable id and the profile's markers.
* ``deployment`` is session-scoped and parametrized by profile id: pytest keeps it alive across the points
  of one profile and tears it down before the next profile (its cache key is the profile id).
* A broken recipe fails collection with one message per problem, naming file, key and fix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .errors import ConfigError
from .matrix import Point, points
from .recipe import Catalog, Profile

_CATALOG = pytest.StashKey[Catalog]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("servebench")
    group.addoption("--recipes", metavar="DIR", help="recipe catalog (default: <rootdir>/recipes)")
    group.addoption("--cluster", metavar="NAME",
                    help="run hardware cases of this cluster (e.g. gb200-nv); without it they are skipped")
    group.addoption("--results-dir", metavar="DIR", default="results",
                    help="where per-point results, logs and reports go (default: results)")


def catalog(config: pytest.Config) -> Catalog:
    if _CATALOG not in config.stash:
        root = config.getoption("--recipes") or Path(config.rootpath) / "recipes"
        config.stash[_CATALOG] = Catalog.load(root)
    return config.stash[_CATALOG]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not {"deployment", "point"} <= set(metafunc.fixturenames):
        return
    try:
        cat = catalog(metafunc.config)
    except ConfigError as err:
        pytest.fail(f"invalid recipe(s):\n{err}", pytrace=False)
    params = [
        pytest.param(pt.profile.id, pt.id, id=pt.id,
                     marks=[getattr(pytest.mark, m) for m in pt.markers]
                     + [pytest.mark.xdist_group(name=pt.profile.id)])
        for pt in points(cat)
    ]
    # Both are indirect: the profile id (shared by a profile's points) is the deployment's cache key, so
    # pytest groups a profile's cases and tears the deployment down only between profiles; the point id is
    # unique per case, so equal concurrencies of two profiles are never grouped together.
    metafunc.parametrize(["deployment", "point"], params, indirect=True, scope="session")


def _unavailable(profile: Profile, config: pytest.Config) -> str | None:
    """Why this profile's deployment cannot start here, or None."""
    cl = profile.cluster
    if cl.kind == "gpu":
        chosen = config.getoption("--cluster")
        if chosen != cl.name:
            return (f"needs cluster {cl.name} ({cl.gpus_per_node} x {cl.gpu_type.upper()} GPUs per node via "
                    f"Slurm); run on its login node with --cluster {cl.name}")
        if shutil.which("sbatch") is None:
            return f"--cluster {cl.name} given, but no Slurm client (sbatch) on PATH"
    return ("starting a deployment is not implemented yet: the cluster and server layers "
            "(issues #3 and #4) are missing")


@pytest.fixture
def point(request: pytest.FixtureRequest) -> Point:
    """The (profile, concurrency) point of this case."""
    return next(pt for pt in points(catalog(request.config)) if pt.id == request.param)


@pytest.fixture(scope="session")
def deployment(request: pytest.FixtureRequest):
    """The running deployment of one profile, shared by all its concurrency points."""
    profile = next(p for p in catalog(request.config).profiles if p.id == request.param)
    reason = _unavailable(profile, request.config)
    if reason:
        pytest.skip(f"{profile.id}: {reason}")
    yield profile
