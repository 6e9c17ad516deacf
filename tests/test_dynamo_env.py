"""The recipe's pinned Dynamo is built once per commit and image into a wheelhouse of the shared cache, and every
step installs it from there with no network (rackbench/tools/dynamo_env.py; #52 item 1). Real pip on wheels made
here: a folder of them stands for the package index."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rackbench.tools import DYNAMO_ENV
from tests.conftest import wheel

pytestmark = pytest.mark.offline


def run(python: str, *args: str, index: Path | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)} if index else
               {"PIP_INDEX_URL": "http://127.0.0.1:9/simple"})          # no index at all: any use of it fails
    return subprocess.Popen([python, str(DYNAMO_ENV), *args], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)


def test_steps_at_once_build_the_commits_runtime_once_and_each_installs_it_without_the_index(tmp_path):
    index = tmp_path / "index"           # what the package index has: a release runtime of the same version
    wheel(index, "sbdyn_runtime", "1.0", "the release")
    wheel(index, "sbdyn_dep", "2.0", "a dependency")
    built = tmp_path / "built"           # what `pip wheel` makes of the commit's lib/bindings/python and of ai-dynamo
    runtime = wheel(built, "sbdyn_runtime", "1.0", "the commit")
    dyn = wheel(built, "sbdyn", "1.0", "the commit", ("sbdyn_runtime==1.0", "sbdyn_dep>=2"))
    house = tmp_path / "cache/dynamo/sbdyn-1"
    makers = [run(sys.executable, "--make-only", str(house), str(runtime), str(dyn), index=index) for _ in range(3)]
    said = [p.communicate(timeout=180)[0] for p in makers]
    assert [p.returncode for p in makers] == [0, 0, 0], said
    lines = sorted(ln.split(":")[1].strip() for out in said for ln in out.splitlines() if ln.startswith("dynamo_env: "))
    assert lines == ["made", "made already", "made already"], said
    assert sorted(p.name for p in house.parent.iterdir()) == ["sbdyn-1", "sbdyn-1.lock"]       # no half-made copy
    assert stat.S_IMODE((house.parent / "sbdyn-1.lock").stat().st_mode) == 0o666                # any user's lock
    assert sorted(p.name for p in house.glob("*.whl")) == ["sbdyn-1.0-py3-none-any.whl",
                                                           "sbdyn_dep-2.0-py3-none-any.whl",
                                                           "sbdyn_runtime-1.0-py3-none-any.whl"]
    # a step: a fresh environment (the image), the wheelhouse only, no index reachable
    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(image)], check=True)
    python = str(image / "bin/python")
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        subprocess.run([python, "-m", "ensurepip", "--default-pip"], check=True, capture_output=True)
    step = run(python, str(house), str(runtime), str(dyn), index=None)
    out = step.communicate(timeout=180)[0]
    assert step.returncode == 0, out
    assert f"dynamo_env: made already: {house}" in out and "installing sbdyn-1.0-py3-none-any.whl" in out, out
    shown = subprocess.run([python, "-c", "import sbdyn, sbdyn_runtime, sbdyn_dep; print(sbdyn_runtime.SAYS)"],
                           capture_output=True, text=True)
    assert shown.stdout.strip() == "the commit", shown.stderr          # the commit's runtime, not the release


def test_a_build_that_fails_leaves_nothing_and_says_what_it_needs(tmp_path):
    house = tmp_path / "cache/dynamo/sbdyn-1"
    out = run(sys.executable, "--make-only", str(house), "sbdyn-missing==9", index=tmp_path)
    text = out.communicate(timeout=120)[0]
    assert out.returncode != 0 and "building sbdyn-missing==9 failed" in text and "Rust toolchain" in text, text
    assert sorted(p.name for p in house.parent.iterdir()) == ["sbdyn-1.lock"]
