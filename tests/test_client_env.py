"""The load generator's environment on a cluster is made once, in the shared cache, with every version pinned
(rackbench/tools/client_env.py), not pip-installed into the server image at every point (#31 defect 5)."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rackbench.tools import CLIENT_ENV, PINS
from tests.conftest import edit, run_cli, wheel

KIMI = "kimi-k3-gb200-dep-c32"


def make(target: Path, pins: Path, *reqs: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CLIENT_ENV), str(target), str(pins), *reqs], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""})


def test_clients_starting_at_once_make_the_environment_once_and_then_find_it(tmp_path):
    whl = wheel(tmp_path)
    pins = tmp_path / "pins.txt"
    pins.write_text("sbdemo==1.0\n")
    target = tmp_path / "cache/envs/sbdemo-1"
    runs = [make(target, pins, str(whl)) for _ in range(3)]
    said = [p.communicate(timeout=120)[0] for p in runs]
    assert [p.returncode for p in runs] == [0, 0, 0], said
    lines = [ln for out in said for ln in out.splitlines() if ln.startswith("client_env: ")]
    assert sorted(ln.split(":")[1].strip() for ln in lines) == ["made", "made already", "made already"], said
    assert sorted(p.name for p in target.parent.iterdir()) == ["sbdemo-1", "sbdemo-1.lock"]     # no half-made copy
    shown = subprocess.run([sys.executable, "-c", "import sbdemo; print(sbdemo.VERSION)"], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(target)})
    assert shown.stdout.strip() == "1.0", shown.stderr
    again = make(target, pins, str(whl))
    assert again.communicate(timeout=60)[0].strip() == f"client_env: made already: {target}"


def test_an_environment_made_for_another_interpreter_is_refused_with_the_way_out(tmp_path):
    target = tmp_path / "envs/x"
    target.mkdir(parents=True)
    (target / ".rackbench-env").write_text("cpython 3.9 ppc64le\n")
    out = make(target, tmp_path / "pins.txt", "x")
    text = out.communicate(timeout=60)[0]
    assert out.returncode != 0 and "made for cpython 3.9 ppc64le" in text and "runtime.client.image" in text, text


def test_a_pin_the_environment_breaks_fails_the_client_step_and_leaves_nothing(tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text("sbdemo==2.0\n")                          # the wheel is 1.0: the pins forbid it
    target = tmp_path / "envs/sbdemo-1"
    out = make(target, pins, str(wheel(tmp_path)))
    text = out.communicate(timeout=120)[0]
    assert out.returncode != 0 and "pip install" in text and "failed" in text, text
    assert sorted(p.name for p in target.parent.iterdir()) == ["sbdemo-1.lock"]


def test_the_gb200_client_installs_nothing_per_point(repo):
    """The client step makes (or finds) its pinned environment in the shared cache and runs AIPerf from it, ahead of
    the image's packages (named in --container-env, so an image's PYTHONPATH cannot win); no pip install runs."""
    out = run_cli("render", KIMI, cwd=repo).stdout
    step = next(ln for ln in out.splitlines() if "--job-name=rackbench-RUN-dep.client " in ln)
    argv = shlex.split(step)
    steps = json.loads(argv[argv.index("--") + 3])              # srun ... -- python3 preamble.py STEPS -- ...
    (env_step,) = [s for s in steps if s["name"] == "client-env"]
    target = env_step["argv"][2]
    assert env_step["argv"][1:] == ["/rackbench-tools/client_env.py", target, "/rackbench-tools/pins/aiperf-0.13.0.txt",
                                    "aiperf==0.13.0"]
    assert target.startswith("/mnt/lustre01/users-public/sa-shared/rackbench/cache/envs/aiperf-0.13.0-")
    assert "pip" not in json.dumps(steps) and f"export PYTHONPATH={target}" in out
    names = next(a for a in argv if a.startswith("--container-env=")).split("=", 1)[1].split(",")
    assert "PYTHONPATH" in names


def test_the_pins_are_the_environment_the_tests_ran_aiperf_with():
    pins = dict(ln.split("==") for ln in (PINS / "aiperf-0.13.0.txt").read_text().splitlines()
                if ln and not ln.startswith("#"))
    assert pins["aiperf"] == "0.13.0" and len(pins) > 50 and all(v.strip() for v in pins.values())


@pytest.mark.catalog("kimi-k3")
def test_an_install_without_pins_is_refused_naming_the_file_and_key(recipes):
    cluster = recipes / "clusters/gb200-nv.yaml"
    edit(cluster, "    constraints: aiperf-0.13.0.txt\n", "")
    res = run_cli("--recipes", recipes, "matrix")
    assert res.returncode == 1 and f"{cluster}" in res.stderr and "runtime.client.install" in res.stderr, res.stderr
    assert "runtime.client.constraints: one of ['aiperf-0.13.0.txt']" in res.stderr
    edit(cluster, "    install: [aiperf==0.13.0]\n", "    install: [aiperf==0.13.0]\n    constraints: nope.txt\n")
    res = run_cli("--recipes", recipes, "matrix")
    assert res.returncode == 1 and "runtime.client.constraints" in res.stderr and "nope.txt" in res.stderr, res.stderr
