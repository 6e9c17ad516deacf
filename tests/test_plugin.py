"""rackbench as a pytest plugin: markers from the catalog, the site hooks, namespaced fixtures, and the
package working from another repository (pip install + a recipes folder)."""

import os
import subprocess
import textwrap
import venv

import pytest

from tests.conftest import REPO, copy_suite

L40S_CLUSTER = """\
name: l40s-box
description: one L40S node without Slurm
kind: gpu
backend: local
gpu_type: l40s
nodes: 1
gpus_per_node: 1
hbm_gib_per_gpu: 44
host_dram_mib_per_node: 131072
dram_utilization: 0.5
"""
L40S_PROFILE = """\
extends: ../local/base.yaml
profile:
  name: vllm
  model: tiny-llama
  cluster: l40s-box
  concurrency: [8, 16]
  layout: {tp: 1}
"""


@pytest.fixture
def suite(pytester):
    copy_suite(pytester.path)
    return pytester


def collected(result):
    return [ln.split("[", 1)[1].rstrip("]") for ln in result.outlines if "::test_point[" in ln]


def test_a_new_gpu_type_collects_and_selects_under_strict_markers(suite):
    """Before, markers lived in pytest.ini: a cluster with gpu_type h200 broke collection of every case."""
    (suite.path / "recipes/clusters/l40s-box.yaml").write_text(L40S_CLUSTER)
    (suite.path / "recipes/l40s").mkdir()
    (suite.path / "recipes/l40s/vllm.yaml").write_text(L40S_PROFILE)
    res = suite.runpytest("--import-mode=importlib", "benchmarks", "-m", "l40s", "--collect-only", "-q")
    assert collected(res) == ["tiny-llama-l40s-vllm-c8", "tiny-llama-l40s-vllm-c16"], res.outlines
    res = suite.runpytest("--import-mode=importlib", "benchmarks", "-m", "not hardware", "--collect-only", "-q")
    got = collected(res)
    assert got and not any(t in c for c in got for t in ("l40s", "h200", "gb200")), got
    res = suite.runpytest("--import-mode=importlib", "--markers")
    res.stdout.fnmatch_lines(["@pytest.mark.hardware: *", "@pytest.mark.gb200: *",
                              "@pytest.mark.l40s: a case of a profile on a L40S cluster (e.g. l40s-box)"])


def test_an_unknown_marker_still_fails_under_strict_markers(suite):
    (suite.path / "tests").mkdir()
    (suite.path / "tests/test_typo.py").write_text("import pytest\n@pytest.mark.gb300\ndef test_x():\n    pass\n")
    res = suite.runpytest("--import-mode=importlib", "tests", "--collect-only", "-q")
    assert res.ret != 0
    res.stdout.fnmatch_lines(["*'gb300' not found in `markers` configuration option*"])


def test_a_second_session_on_one_junit_file_stops_at_once_naming_it(suite, tmp_path):
    """#35: two sessions given one --junitxml each wrote it at the end, and the last replaced the other's cases."""
    import fcntl
    junit = tmp_path / "out/junit.xml"
    junit.parent.mkdir()
    (suite.path / "tests").mkdir()
    (suite.path / "tests/test_x.py").write_text("def test_x():\n    pass\n")
    with open(junit, "a") as held:                               # the first session, still running
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = suite.runpytest("--import-mode=importlib", "tests", "-q", f"--junitxml={junit}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--junitxml {junit}: another session is writing this file now" in res.stderr.str()
    res = suite.runpytest("--import-mode=importlib", "tests", "-q", f"--junitxml={junit}")   # alone: it writes it
    assert res.ret == 0 and "<testcase" in junit.read_text()


SITE_CONFTEST = '''
import dataclasses
import json
import pytest

def pytest_configure(config):
    config.calls = []

def pytest_rackbench_allocation_request(profile, request):
    return dataclasses.replace(request, scheduler=dataclasses.replace(
        request.scheduler, directives={**request.scheduler.directives, "qos": "site-high"}))

def pytest_rackbench_result_fields(point, result):
    return {"site_rack": "r12", "gpus_seen": result.throughput.gpus}

@pytest.fixture
def profile():          # a user's own fixture with a common name: rackbench's are sb_*
    return "the user's"

def test_user_fixture(profile):
    assert profile == "the user's"
'''


def test_site_hooks_adjust_the_allocation_and_add_result_fields(suite, monkeypatch):
    """Both hooks run on a real point (a reused result stands in for AIPerf, the local allocation for Slurm)."""
    import json
    from rackbench.catalog.loader import Catalog

    (suite.path / "conftest.py").write_text(SITE_CONFTEST)
    (suite.path / "benchmarks/test_alloc.py").write_text(textwrap.dedent('''
        def test_request_seen(sb_point, sb_allocation):
            assert sb_allocation.request.scheduler.directives["qos"] == "site-high"
    '''))
    prof = next(p for p in Catalog.load(REPO / "recipes").profiles if p.id == "tiny-llama-cpu-vllm")
    prior = suite.path / "prior/points"
    prior.mkdir(parents=True)
    src = json.loads((REPO / "tests/data/results-local/points/tiny-llama-cpu-vllm-c1.json").read_text())
    src["identity"]["recipe_fingerprint"] = prof.fingerprint
    (prior / "tiny-llama-cpu-vllm-c1.json").write_text(json.dumps(src))
    res = suite.runpytest("--import-mode=importlib", "benchmarks", "conftest.py", "-p", "no:cacheprovider", "-k",
                          "tiny-llama-cpu-vllm-c1 or user_fixture", "--reuse-results",
                          str(prior.parent), "--results-dir", "out")
    res.assert_outcomes(passed=3)
    stored = json.loads((suite.path / "out/latest/points/tiny-llama-cpu-vllm-c1.json").read_text())
    assert stored["verdict"]["passed"] is True


def test_site_result_fields_through_real_pluggy(pytester):
    """A site's pytest_rackbench_result_fields implementations, registered in a real conftest: one that declares
    only ``result`` (pluggy allows a subset of the hook's arguments), one that declares only ``point``, one that
    raises. Each declared-subset implementation's fields reach the result; the raising one is logged and costs
    nobody else their fields."""
    copy_suite(pytester.path)
    pytester.syspathinsert()
    pytester.makeconftest("""
pytest_plugins = ["site_plugin", "broken_plugin"]

def pytest_rackbench_result_fields(result):
    return {"rack": "r7", "gpus_seen": result.throughput.gpus}
""")
    (pytester.path / "site_plugin.py").write_text(
        "def pytest_rackbench_result_fields(point):\n    return {'case': point.id}\n")
    (pytester.path / "broken_plugin.py").write_text(
        "def pytest_rackbench_result_fields(point, result):\n    raise RuntimeError('site bug')\n")
    pytester.makepyfile(test_fields="""
import json
from pathlib import Path
from rackbench.plugin.fixtures import site_fields
from rackbench.plugin.session import of
from rackbench.results.files import read

def test_fields(request, caplog):
    point = of(request.config).point("tiny-llama-cpu-vllm-c1")
    result = read(Path(%r))
    extra = site_fields(request.config, point)(result)
    assert extra == {"rack": "r7", "gpus_seen": 1, "case": "tiny-llama-cpu-vllm-c1"}, extra
    assert any("broken_plugin failed; its fields are left out" in r.message for r in caplog.records)
""" % str(REPO / "tests/data/results-local/points/tiny-llama-cpu-vllm-c1.json"))
    res = pytester.runpytest("--import-mode=importlib", "test_fields.py", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)


@pytest.mark.install
def test_installed_package_runs_from_another_repository(tmp_path):
    """pip install <checkout> into a fresh venv; a project with only a recipes folder and a test file collects
    the sweep through the pytest11 entry point (no conftest, no pytest.ini of ours)."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    pip_env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-compile", str(REPO)],   # no .pyc: ~15 s
                          capture_output=True, text=True, env=pip_env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    project = tmp_path / "other-repo"
    (project / "recipes").mkdir(parents=True)
    for name in ("clusters", "models", "presets", "configs", "kimi-k3"):
        subprocess.run(["cp", "-r", str(REPO / "recipes" / name), str(project / "recipes" / name)], check=True)
    (project / "test_bench.py").write_text("def test_point(sb_point, sb_measured, sb_judge):\n    pass\n")
    res = subprocess.run([str(py), "-m", "pytest", "--collect-only", "-q", "-m", "gb200 and offload",
                          "--strict-markers", "-p", "no:cacheprovider"], cwd=project, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "test_bench.py::test_point[kimi-k3-gb200-dep_offload-c384]" in res.stdout
    assert "4/18 tests collected" in res.stdout, res.stdout[-1000:]


def test_a_long_wait_says_what_it_waits_for_on_the_status_line(suite):
    """#54: the main job was silent for 85-159 s while a server started (its readiness wait said nothing). Every
    wait goes through rackbench.core.poll, and the session's status line says what it waits for and how long,
    at least every 20 s."""
    waited(suite, "    poll(lambda: Done(1) if t[0] >= 45 else 'loading the engine', timeout=60, interval=5, "
                  "what='the servers', sleep=sleep, clock=lambda: t[0])\n",
           "*waiting for the servers: 10 s so far (loading the engine)*")


def waited(suite, body: str, said: str) -> None:
    """A test whose ``body`` waits through rackbench.core.poll on a clock of its own (``t``, ``sleep``), run in a
    session of its own: it passes, and the session's output holds ``said``."""
    (suite.path / "tests").mkdir(exist_ok=True)
    (suite.path / "tests/test_wait.py").write_text(
        "import contextlib, io, sys\n"
        "from rackbench.core.poll import Done, poll\n\n"
        "def test_wait():\n"
        "    t = [0.0]\n"
        "    def sleep(s):\n"
        "        t[0] += s\n" + body)
    res = suite.runpytest("--import-mode=importlib", "tests/test_wait.py", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([said])


def test_a_status_line_leaves_a_redirected_output_where_it_was(suite):
    """The rehearsal's test runs the CLI in-process under contextlib.redirect_stdout; the status line, written
    past pytest's capture, put pytest's capture back as sys.stdout, and what the CLI printed after its first wait
    went there instead of to its caller (CI, 2026-12-06)."""
    waited(suite, "    out, err = io.StringIO(), io.StringIO()\n"
                  "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
                  "        poll(lambda: Done(1) if t[0] >= 25 else 'loading', timeout=60, interval=5,"
                  " what='the servers', sleep=sleep, clock=lambda: t[0])\n"
                  "        print('after the wait')\n"
                  "        print('to stderr', file=sys.stderr)\n"
                  "    assert (out.getvalue(), err.getvalue()) == ('after the wait\\n', 'to stderr\\n')\n",
           "*waiting for the servers: 10 s so far (loading)*")
