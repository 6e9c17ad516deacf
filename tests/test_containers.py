"""Real pyxis 0.24.0 and enroot 4.1.2 under scripts/slurm-local (built from their release sources): srun steps with
pyxis's flags run in enroot containers of the stand-in images, as on gb200-nv. What a launch meets there, each the
way a first GB200 run would meet it: the image's filesystem and ENV, a read-only root unless the step asks for a
writable one, a missing or relative mount source failing the start, the image's entrypoint run only when asked,
the image's working directory, a /tmp of the step's own, no registry to pull from, and a step as a non-root user.

Skipped, with the reason, where no real pyxis is enabled (the vendored sources were not at hand): never run on an
imitation."""

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm
B = Path("/var/lib/rackbench-slurm")
SERVE = B / "images/serve.sqsh"
INFRA = B / "images/infra.sqsh"
PYXIS_CONF = Path("/etc/slurm/plugstack.conf.d/pyxis.conf")


@pytest.fixture
def pyxis(slurm):
    if not PYXIS_CONF.exists() or shutil.which("enroot") is None or not SERVE.exists():
        pytest.skip(f"no real pyxis + enroot here ({PYXIS_CONF}, enroot, {SERVE}): scripts/slurm-local start builds "
                    "them from the release sources in ../shared/vendor (RACKBENCH_VENDOR)")


def srun(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["srun", "-N1", "-w", "n1", "-J", "rackbench-pyxis-test", *args], capture_output=True,
                          text=True, timeout=180, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def entrypoint_image(tmp_path_factory):
    """The serving image with an entrypoint (enroot runs /etc/rc; an imported image's ENTRYPOINT goes there) and a
    working directory (/etc/rc changes into the image's WORKDIR), as the vLLM image has both."""
    if shutil.which("unsquashfs") is None or not SERVE.exists():
        pytest.skip("no squashfs-tools or stand-in image: scripts/slurm-local start")
    root = tmp_path_factory.mktemp("image") / "rootfs"
    subprocess.run(["unsquashfs", "-q", "-n", "-d", str(root), str(SERVE)], check=True, capture_output=True)
    (root / "workspace").mkdir()
    # the layout enroot's import gives an image with WORKDIR and ENTRYPOINT: /etc/rc changes into the working
    # directory, sources /etc/rc.local (where pyxis writes `exec "$@"` unless the entrypoint is to run), then execs
    # the entrypoint
    (root / "etc/rc").write_text('cd /workspace || exit 1\nif [ -s /etc/rc.local ]; then . /etc/rc.local; fi\n'
                                 'exec /entrypoint.sh "$@"\n')
    (root / "entrypoint.sh").write_text('#!/bin/sh\necho "the image entrypoint ran" > /tmp/entrypoint\nexec "$@"\n')
    (root / "entrypoint.sh").chmod(0o755)
    image = root.parent / "entrypoint.sqsh"
    subprocess.run(["mksquashfs", str(root), str(image), "-noappend", "-comp", "lz4", "-quiet"], check=True,
                   capture_output=True)
    shutil.rmtree(root)
    image.parent.chmod(0o755)
    image.chmod(0o644)
    return image


def test_a_step_runs_in_the_image_with_its_environment_over_the_tasks(pyxis):
    env = {**os.environ, "RACKBENCH_IMAGE": "from-the-task", "KEPT_FROM_TASK": "yes"}
    done = srun(f"--container-image={SERVE}", "--chdir=/", "sh", "-c",
                'echo "$RACKBENCH_IMAGE|$KEPT_FROM_TASK"; test -e /work/main; echo $?; command -v etcd nats-server; '
                'echo etcd=$?', env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # the image's ENV wins over the task's (pyxis: "their existing values in the image take precedence")
    assert lines[0] == "serve|yes", lines
    assert lines[1] == "1", "the host's folders are not in the container"
    assert lines[-1] != "etcd=0", "the serving image carries no etcd or NATS"
    infra = srun(f"--container-image={INFRA}", "sh", "-c", "command -v etcd nats-server")
    assert infra.returncode == 0 and "/usr/bin/etcd" in infra.stdout, infra.stdout + infra.stderr


def test_writing_into_the_image_fails_unless_the_step_asks_for_a_writable_root(pyxis):
    """enroot's root filesystem is read-only by default: a pip install into the image fails with EROFS on the
    cluster, and so it does here; with --container-writable it works, and /tmp is the step's own either way."""
    ro = srun(f"--container-image={SERVE}", "sh", "-c", "touch /tmp/ok || exit 9; touch /usr/local/x")
    assert ro.returncode not in (0, 9) and "Read-only file system" in ro.stderr, ro.stdout + ro.stderr
    rw = srun(f"--container-image={SERVE}", "--container-writable", "sh", "-c", "touch /usr/local/x")
    assert rw.returncode == 0, rw.stderr
    after = srun(f"--container-image={SERVE}", "sh", "-c", "ls /tmp; test -e /usr/local/x; echo x=$?")
    assert "ok" not in after.stdout.split() and "x=1" in after.stdout, after.stdout    # unnamed: gone with its step


def test_a_missing_or_relative_mount_source_or_a_registry_image_fails_the_step(pyxis, tmp_path):
    missing = srun(f"--container-image={SERVE}", f"--container-mounts={tmp_path}/absent:/data", "true")
    assert missing.returncode != 0 and "absent" in missing.stderr, missing.stderr
    (tmp_path / "rel").mkdir()
    relative = srun(f"--container-image={SERVE}", "--container-mounts=rel:/data", "true", cwd=tmp_path)
    assert relative.returncode != 0, relative.stdout + relative.stderr     # pyxis takes no bare relative source
    pulled = srun("--container-image=vllm/vllm-openai:kimi-k3", "true")
    assert pulled.returncode != 0, pulled.stdout + pulled.stderr           # no registry is reachable here


def test_mounts_read_only_where_asked(pyxis, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/f").write_text("x")
    (tmp_path / "rw").mkdir()
    one = srun(f"--container-image={SERVE}", f"--container-mounts={tmp_path}/data:/data:ro,{tmp_path}/rw:/rw",
               "sh", "-c", "cat /data/f; touch /rw/g || exit 9; touch /data/g")
    assert one.stdout == "x" and one.returncode not in (0, 9), one.stdout + one.stderr
    assert "Read-only file system" in one.stderr and (tmp_path / "rw/g").exists() and not (tmp_path / "data/g").exists()


def test_the_image_entrypoint_and_workdir_are_the_images_unless_the_step_says(pyxis, entrypoint_image):
    """pyxis runs the image's entrypoint with --container-entrypoint (and by default where a site sets
    execute_entrypoint); rackbench passes --no-container-entrypoint and --container-workdir=/, as srtctl does."""
    said = srun(f"--container-image={entrypoint_image}", "--container-entrypoint", "sh", "-c",
                "cat /tmp/entrypoint; pwd")
    assert said.returncode == 0 and said.stdout.splitlines() == ["the image entrypoint ran", "/workspace"], \
        said.stdout + said.stderr
    plain = srun(f"--container-image={entrypoint_image}", "--no-container-entrypoint", "--container-workdir=/",
                 "--chdir=/", "sh", "-c", "cat /tmp/entrypoint 2>/dev/null || echo none; pwd")
    assert plain.returncode == 0 and plain.stdout.splitlines() == ["none", "/"], plain.stdout + plain.stderr


def test_a_step_of_a_user_who_is_not_root_starts_in_the_image(pyxis):
    """Every step ran as real root in the home-made model, so no permission problem ever appeared; the stand-in
    images hold no device node, so real enroot unpacks and starts them as an ordinary user too."""
    import tempfile
    name = "rackbench-pyxis"          # an ordinary user with a shell (enroot starts the container through it)
    if os.geteuid() != 0:
        pytest.skip(f"not root: cannot add {name} or run srun as that user")
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--shell", "/bin/sh", "--home-dir", "/nonexistent", "--no-create-home",
                        name], check=True, capture_output=True)
        user = pwd.getpwnam(name)
    out = Path(tempfile.mkdtemp(prefix="rackbench-pyxis-user-", dir="/tmp"))   # a folder that user can reach
    out.chmod(0o777)
    # srun run by that user, as a user runs it (srun --uid as root fails whenever the job queues: Slurm answers
    # the allocation with a credential for the user, which root's waiting srun cannot decode; CI, 2026-12-06)
    done = subprocess.run(["runuser", "-u", name, "--", "srun", "-N1", "-w", "n1", "-J", "rackbench-pyxis-test",
                           f"--container-image={SERVE}", "--chdir=/", f"--container-mounts={out}:/out", "sh", "-c",
                           "id -u > /out/uid; echo $RACKBENCH_IMAGE"], capture_output=True, text=True, timeout=180,
                          cwd="/")
    assert done.returncode == 0 and done.stdout.strip() == "serve", done.stdout + done.stderr
    assert (out / "uid").read_text().strip() == str(user.pw_uid)
    shutil.rmtree(out)


def test_the_processs_environment_wins_over_the_images_inside_its_container(pyxis, slurm, tmp_path, monkeypatch):
    """pyxis sets the image's ENV over srun's task environment, so a recipe's NCCL_*/HF_* value the image also sets
    was silently the image's: a launch names its environment in --container-env (values stay in srun's
    environment) and unsets what the recipe unsets inside the container."""
    import uuid

    from rackbench.cluster.base import AllocationRequest, SchedulerOptions
    token = f"sbtest-env-{uuid.uuid4().hex[:8]}"
    monkeypatch.chdir(tmp_path)         # started from a folder the image does not have, as CI's checkout is
    alloc = slurm.allocate(AllocationRequest(name=token, nodes=1, scheduler=SchedulerOptions(partition="debug"),
                                             workdir=tmp_path,
                                             container_image=str(SERVE), stop_grace_s=5), timeout=300)
    try:
        shown = alloc.launch(0, "env", ["sh", "-c", 'echo "${RACKBENCH_IMAGE-unset}|${FROM_RECIPE-}|$(pwd)"'],
                             {"RACKBENCH_IMAGE": "recipe", "FROM_RECIPE": "yes"}, tmp_path / "env.log", oneshot=True)
        unset = alloc.launch(0, "unset", ["sh", "-c", 'echo "${RACKBENCH_IMAGE-unset}"'],
                             {"RACKBENCH_IMAGE": None}, tmp_path / "unset.log", oneshot=True)
        assert shown.popen.wait(120) == 0 and unset.popen.wait(120) == 0, shown.tail() + unset.tail()
    finally:
        alloc.release()
    assert shown.log.read_text().splitlines()[-1] == "recipe|yes|/", shown.log.read_text()     # in the image
    assert unset.log.read_text().splitlines()[-1] == "unset", unset.log.read_text()
    assert "couldn't chdir" not in shown.log.read_text() + unset.log.read_text()      # a step starts in /
    assert "RACKBENCH_IMAGE=recipe" not in " ".join(shown.command)
    assert "--no-container-entrypoint" in shown.command and "--container-writable" not in shown.command
