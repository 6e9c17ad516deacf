"""The pyxis model under scripts/slurm-local (scripts/containers/pyxis_model.c): srun steps with pyxis's flags run
in their own unpacked copy of a stand-in image, as unnamed pyxis containers do on gb200-nv. What a launch meets
there: the image's filesystem and ENV, a missing mount source failing the start, read-only binds, a /tmp that
vanishes with the step, no registry to pull from."""

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm
B = Path("/var/lib/servebench-slurm")
SERVE = B / "images/serve.sqsh"
INFRA = B / "images/infra.sqsh"


@pytest.fixture
def model(slurm):
    conf = Path("/etc/slurm/plugstack.conf.d/servebench-pyxis-model.conf")
    if not conf.exists() or not SERVE.exists():
        pytest.skip(f"{conf} or {SERVE} missing: a real pyxis is configured, or scripts/slurm-local start did not "
                    "make the pyxis model")


def srun(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["srun", "-N1", "-w", "n1", "-J", "servebench-pyxis-model-test", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_a_step_runs_in_the_image_with_its_environment_over_the_tasks(model, tmp_path):
    import os
    env = {**os.environ, "SERVEBENCH_IMAGE": "from-the-task", "KEPT_FROM_TASK": "yes", "LANG": "C.UTF-8"}
    done = srun(f"--container-image={SERVE}", "sh", "-c",
                'echo "$SERVEBENCH_IMAGE|$KEPT_FROM_TASK|${LANG:-unset}|$PATH|$(pwd)"; test -e /work/main; echo $?; '
                'command -v etcd nats-server; echo etcd=$?', env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # the image's ENV wins over the task's (pyxis: "their existing values in the image take precedence"); LANG goes
    assert lines[0] == "serve|yes|unset|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|/", lines
    assert lines[1] == "1", "the host's folders are not in the container"
    assert lines[-1] != "etcd=0", "the serving image carries no etcd or NATS"
    # --container-env (the task's value wins): test_the_processs_environment_wins_over_the_images_inside_its_container
    infra = srun(f"--container-image={INFRA}", "sh", "-c", "command -v etcd nats-server")
    assert infra.returncode == 0 and "/usr/bin/etcd" in infra.stdout, infra.stdout + infra.stderr


def test_a_missing_mount_source_or_a_registry_image_fails_the_step(model, tmp_path):
    missing = srun(f"--container-image={SERVE}", f"--container-mounts={tmp_path}/absent:/data", "true")
    assert missing.returncode == 1
    assert f"mount source {tmp_path}/absent does not exist on this node" in missing.stderr, missing.stderr
    pulled = srun("--container-image=vllm/vllm-openai:kimi-k3", "true")
    assert pulled.returncode == 1 and "imports no image from a registry" in pulled.stderr, pulled.stderr


def test_mounts_read_only_and_a_tmp_of_the_steps_own(model, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/f").write_text("x")
    (tmp_path / "rw").mkdir()
    one = srun(f"--container-image={SERVE}", f"--container-mounts={tmp_path}/data:/data:ro,{tmp_path}/rw:/rw",
               "sh", "-c", "cat /data/f; touch /rw/g /tmp/left-by-one-step || exit 9; touch /data/g")
    assert one.stdout == "x" and one.returncode not in (0, 9), one.stdout + one.stderr
    assert "Read-only file system" in one.stderr and (tmp_path / "rw/g").exists() and not (tmp_path / "data/g").exists()
    after = srun(f"--container-image={SERVE}", "sh", "-c", "ls /tmp")
    assert after.returncode == 0 and "left-by-one-step" not in after.stdout      # an unnamed container vanished
    # slurmstepd removes an unnamed container once the step has ended, which srun does not wait for
    from servebench.core.poll import Done, poll
    poll(lambda: Done(None) if not list((B / "containers").glob("[0-9]*")) else "left on the node", timeout=30,
         interval=0.5, what="the step's unpacked container to be removed")


def test_the_processs_environment_wins_over_the_images_inside_its_container(model, slurm, tmp_path, monkeypatch):
    """pyxis sets the image's ENV over srun's task environment, so a recipe's NCCL_*/HF_* value the image also sets
    was silently the image's: a launch names its environment in --container-env (values stay in srun's
    environment) and unsets what the recipe unsets inside the container."""
    import uuid

    from servebench.cluster.base import AllocationRequest
    token = f"sbtest-env-{uuid.uuid4().hex[:8]}"
    monkeypatch.chdir(tmp_path)         # started from a folder the image does not have, as CI's checkout is
    alloc = slurm.allocate(AllocationRequest(name=token, nodes=1, partition="debug", workdir=tmp_path,
                                             container_image=str(SERVE), stop_grace_s=5), timeout=300)
    try:
        shown = alloc.launch(0, "env", ["sh", "-c", 'echo "${SERVEBENCH_IMAGE-unset}|${FROM_RECIPE-}|$(pwd)"'],
                             {"SERVEBENCH_IMAGE": "recipe", "FROM_RECIPE": "yes"}, tmp_path / "env.log", oneshot=True)
        unset = alloc.launch(0, "unset", ["sh", "-c", 'echo "${SERVEBENCH_IMAGE-unset}"'],
                             {"SERVEBENCH_IMAGE": None}, tmp_path / "unset.log", oneshot=True)
        assert shown.popen.wait(120) == 0 and unset.popen.wait(120) == 0, shown.tail() + unset.tail()
    finally:
        alloc.release()
    assert shown.log.read_text().splitlines()[-1] == "recipe|yes|/", shown.log.read_text()     # in the image
    assert unset.log.read_text().splitlines()[-1] == "unset", unset.log.read_text()
    assert "couldn't chdir" not in shown.log.read_text() + unset.log.read_text()      # a step starts in /
    assert "SERVEBENCH_IMAGE=recipe" not in " ".join(shown.command)
