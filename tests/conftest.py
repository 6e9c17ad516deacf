pytest_plugins = ["pytester"]

import matplotlib  # noqa: E402
matplotlib.use("Agg")
# In-process pytester runs restore sys.modules afterwards; a C extension (numpy, kiwisolver) cannot be imported
# twice in one process, so the report's plotting stack is imported once, here, before any of them.
import matplotlib.pyplot  # noqa: E402,F401

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# pytester points HOME at each test's own folder, and a session a test starts would generate the tiny model again
# (tokenizer training: 15 s on 2 cores), inspect the model class in a vLLM subprocess again and rebuild matplotlib's
# font list: every session shares the user's caches (the model cache is keyed by the generator's hash and locked
# while one is written).
for _var, _cache in (("RACKBENCH_CACHE", "rackbench"), ("VLLM_CACHE_ROOT", "vllm"), ("MPLCONFIGDIR", "matplotlib")):
    os.environ.setdefault(_var, str(Path.home() / ".cache" / _cache))
NEEDS_MORE = ("local", "slurm", "hardware", "install", "fuzz", "browser")   # what a test may need beyond this checkout


SHM = Path("/dev/shm")


def pytest_configure(config):
    """The offline selection (`-m offline`: scripts/test, scripts/bench-tests, CI's first part) keeps its temporary
    folders on /dev/shm where that is a writable tmpfs, unless --basetemp or $TMPDIR says where. Its tests copy the
    48-file catalog ~190 times: on this kind of machine's disk a file's creation cost 30-700 us of system time,
    varying 20x within a minute, on tmpfs ~12 us (docs/measurements.md). Only that selection: a test that runs a
    server or a container step keeps the disk (a container mounts its own /dev/shm; traces can be GiBs)."""
    if (config.option.markexpr or "").strip() != "offline" or config.option.basetemp or os.environ.get("TMPDIR"):
        return
    if os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free > 2 * 2**30:
        import tempfile
        tempfile.tempdir = str(SHM)


def pytest_collection_finish(session):
    """What collection made (modules, the catalog, hypothesis and matplotlib state) lives to the end: frozen out of
    the cyclic collector's sweeps, with a young generation of 20,000 allocations instead of 700. The offline suite's
    collector time fell from 3.0 to 0.8 CPU-s (docs/measurements.md). Reference counting frees what holds no cycle
    at once, as before; only objects in cycles wait longer for a sweep."""
    import gc
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def pytest_collection_modifyitems(items):
    """`offline`: every test that needs nothing but this checkout (none of NEEDS_MORE)."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in NEEDS_MORE):
            item.add_marker(pytest.mark.offline)


@pytest.fixture
def repo() -> Path:
    return REPO


# The plugins a session of the suite needs: its own, and xdist (whose hooks it implements). Entry points found in this
# venv beside them (hypothesis, anyio, pytest-timeout) have nothing to do with what those sessions check.
SUITE_PLUGINS = "xdist.plugin,rackbench.plugin"


@pytest.fixture
def pytester(pytester, monkeypatch):
    """pytester, whose sessions (and their xdist workers) load SUITE_PLUGINS only, not every entry point installed:
    each in-process session restores sys.modules when it ends, so what another plugin imports in it (hypothesis at
    its terminal summary) was imported again by the next. Loading through the pytest11 entry point itself is what
    tests/test_plugin.py's install test checks, in a fresh venv."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_PLUGINS", SUITE_PLUGINS)
    return pytester


# The catalog's shared parts: cluster and model files, presets, configs and the declaration. Every other top-level
# folder of recipes/ holds profiles, which extend only files of their own folder and presets/.
SHARED = ("clusters", "models", "presets", "configs", "catalog.yaml")


def catalog_copy(dst: Path, *folders: str) -> Path:
    """A copy of the shipped catalog at ``dst`` with the shared parts and only the profile ``folders`` named (all of
    them when none is): a load builds those profiles, not all 22 (~9 ms instead of ~23 on this kind of machine)."""
    keep = set(SHARED) | set(folders)
    unknown = set(folders) - {p.name for p in (REPO / "recipes").iterdir()}
    assert not unknown, f"no profile folder {sorted(unknown)} in recipes/"
    shutil.copytree(REPO / "recipes", dst, ignore=lambda d, names: [] if not folders or Path(d) != REPO / "recipes"
                    else [n for n in names if n not in keep])
    return dst


@pytest.fixture
def recipes(request, tmp_path: Path) -> Path:
    """A private copy of the shipped recipe catalog, for tests that break it on purpose; a test marked
    ``@pytest.mark.catalog("kimi-k3", ...)`` gets only those profile folders (and the shared parts)."""
    mark = request.node.get_closest_marker("catalog")
    return catalog_copy(tmp_path / "recipes", *(mark.args if mark else ()))


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace text in a recipe file; fail loudly if the anchor is not there (the test would be vacuous)."""
    text = path.read_text()
    assert text.count(old) >= 1, f"{old!r} not found in {path}"
    path.write_text(text.replace(old, new, count))


def before_short_summary(out: str) -> str:
    """A session's output up to pytest's "short test summary info" section. Where $CI is set (every CI service sets
    it) pytest repeats each failure's whole message there instead of trimming it to the terminal's width, so a test
    that counts what the suite itself prints counts this part."""
    return out.split("short test summary info", 1)[0]


@pytest.fixture(scope="session")
def catalog():
    """The shipped recipe catalog (read-only; tests that break it use `recipes`)."""
    from rackbench.catalog.loader import Catalog
    return Catalog.load(REPO / "recipes")


@pytest.fixture(scope="session")
def slurm():
    """A running local Slurm controller: started with scripts/slurm-local when this user can."""
    import os
    import subprocess

    from rackbench.cluster.slurm import SlurmBackend

    backend = SlurmBackend()
    if backend.unavailable() is None:
        return backend
    if os.geteuid() != 0:
        pytest.skip(f"no Slurm controller here ({backend.unavailable()}) and not root to start one")
    subprocess.run([str(REPO / "scripts/slurm-local"), "start"], check=True, timeout=300)
    assert backend.unavailable() is None
    return backend


def recorded(point, artifact_dir: Path, *, before=None, after=None, exit_code: int | None = 0, versions=None,
             run_id: str = "r1", idle_wait_s: float | None = 3.0, stopped_by: str | None = None, power=(),
             telemetry=None):
    """A point's result built from a recorded AIPerf folder, through AIPerf's own reader and the real builder."""
    from rackbench.core.results_folder import CaseFolder
    from rackbench.load.aiperf import records
    from rackbench.load.measure import Measurement
    from rackbench.results.build import build

    m = Measurement(point, CaseFolder(Path(artifact_dir).parent), run_id, "aiperf", records.read(artifact_dir),
                    exit_code=exit_code, before=before, after=after, idle_wait_s=idle_wait_s,
                    started_at="2026-11-29T19:27:00+00:00", finished_at="2026-11-29T19:29:00+00:00",
                    versions=dict(versions or {}), logs=["server.log"], stopped_by=stopped_by, out_dir=Path(artifact_dir),
                    power=list(power), telemetry=telemetry)
    return build(m)


def wheel(folder: Path, name: str = "sbdemo", version: str = "1.0", says: str | None = None,
          requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel made here (pip then needs no index): its module's VERSION, and SAYS where it came from."""
    import zipfile
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n"
                                                                                  for r in requires)
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\nSAYS = {says!r}\n", f"{info}/METADATA": meta,
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rackbench-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as z:
        for f, text in files.items():
            z.writestr(f, text)
    return path


def by_id(catalog, profile_id: str):
    return next(p for p in catalog.profiles if p.id == profile_id)


def copy_suite(dest: Path) -> None:
    """The suite as a user checks it out (plugin config, recipes, benchmark cases), for pytester runs."""
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(REPO / name, dest / name)
    for name in ("recipes", "benchmarks"):
        shutil.copytree(REPO / name, dest / name)


class CliResult:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_cli(*args: str, cwd: Path = REPO) -> CliResult:
    """`rackbench ARGS` in this process (as the console script would run it, from ``cwd``): the CLI's own
    logic without an interpreter start per call. tests/test_cli.py runs `python -m rackbench` for real once."""
    import contextlib
    import io
    import os

    from rackbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (print(exit_.code, file=err) or 1)
    finally:
        os.chdir(old)
    return CliResult(code, out.getvalue(), err.getvalue())
