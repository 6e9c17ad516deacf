"""The srun command line of one step (pure: no Slurm is asked anything here): its name, the image it runs in, pyxis's
options and the environment names that win inside a container, a stand-in's node-local disks, and the one-node
step that imports an image."""

from __future__ import annotations

from rackbench.cluster.base import ON_THE_NODE, AllocationRequest
from rackbench.cluster.request import mount_option
from rackbench.tools import IMAGE_IMPORT


def step_name(req: AllocationRequest, process: str) -> str:
    """The step's name in squeue/sacct: the job's name and the process, so release can signal it by step id."""
    return f"{req.name}.{process}"


def step_image(req: AllocationRequest, image: str | None) -> str | None:
    """The image a step runs in: its own, else the allocation's; None on the node itself (ON_THE_NODE, or none)."""
    image = image or req.container_image
    return None if image == ON_THE_NODE else image


def node_disks(node_local: dict[str, str], node: str) -> dict[str, str]:
    """A stand-in's node-local disks on ``node``: path every step sees -> this host's folder behind it."""
    return {path: backing.replace("{node}", node) for path, backing in node_local.items()}


def node_mounts(mounts: dict[str, str], node_local: dict[str, str], node: str) -> dict[str, str]:
    """The step's ``--container-mounts`` on ``node`` of a stand-in with node-local disks: each disk's backing folder
    of this host at the disk's path, and a mount whose source lies on such a disk read from that node's backing (the
    container sees the node's own disk, as a GB200 node's NVMe)."""
    disks = node_disks(node_local, node)

    def on_host(src: str) -> str:
        for path, backing in disks.items():
            if src == path or src.startswith(path.rstrip("/") + "/"):
                return backing + src[len(path.rstrip("/")):]
        return src
    return {**{backing: path for path, backing in disks.items()},
            **{on_host(src): dst for src, dst in mounts.items()}}


def srun_prefix(job_id: str, node: str, req: AllocationRequest, process: str = "step",
                image: str | None = None, env: dict[str, str | None] | None = None,
                node_local: dict[str, str] | None = None) -> list[str]:
    """The srun command line of one step. In a container (pyxis) the image's ENV is set over the task's environment
    (pyxis: "their existing values in the image take precedence"), so the names of the process's own environment
    go in ``--container-env`` and win inside the container; their values travel in srun's environment, never on
    the command line. The image's entrypoint is never run (``--no-container-entrypoint``, as srtctl passes it: a
    site that sets pyxis' execute_entrypoint would prepend the vLLM image's entrypoint to every step), and the root
    filesystem is writable only where the step installs into it (``--container-writable``: enroot's default is
    read-only). A stand-in's node-local disks are mounts of the node's folder of this host.

    A container step starts in ``/`` (``--container-workdir`` and ``--chdir``): pyxis starts in the image's WORKDIR,
    and Slurm changes into the step's folder again after pyxis entered the container (slurmstepd's
    ``_pre_task_child_privileged``); the folder rackbench was started from is not in the image."""
    argv = ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            "--export=ALL", f"--job-name={step_name(req, process)}"]
    image = step_image(req, image)
    if image:
        argv += [f"--container-image={image}", "--no-container-entrypoint", "--container-workdir=/", "--chdir=/"]
        if req.container_writable:
            argv.append("--container-writable")
        mounts = node_mounts(req.container_mounts, node_local or {}, node)
        if mounts:
            argv.append("--container-mounts=" + mount_option(mounts))
        names = sorted(k for k, v in (env or {}).items() if v is not None)
        if names:
            argv.append("--container-env=" + ",".join(names))
    argv += [f"--{k}={v}" if v != "" else f"--{k}" for k, v in req.scheduler.step_options.items()]
    return argv


def one_node_job(job_name: str, partition: str | None, account: str | None, argv: list[str],
                 req: AllocationRequest | None = None) -> list[str]:
    """A one-node srun job of its own (no allocation of a profile's: `rackbench stage`), on the node itself, or in
    ``req``'s image with its mounts, read-only, as a profile's steps run there."""
    out = ["srun", "--nodes=1", "--ntasks=1", "--time=02:00:00", f"--job-name={job_name}",
           *([f"--partition={partition}"] if partition else []), *([f"--account={account}"] if account else [])]
    if req is not None and req.container_image:
        out += [f"--container-image={req.container_image}", "--no-container-entrypoint", "--container-workdir=/",
                "--chdir=/", *(["--container-mounts=" + mount_option(req.container_mounts)]
                               if req.container_mounts else [])]
    return out + list(argv)


def import_step(partition: str | None, account: str | None, file: str, name: str) -> list[str]:
    """The one-node srun step that imports image ``name`` to ``file`` (rackbench/tools/image_import.py, with the
    node's python3: enroot runs where pyxis does), for `rackbench stage --images`."""
    return one_node_job("rackbench-image-import", partition, account, ["python3", str(IMAGE_IMPORT), file, name])


def unset_argv(env: dict[str, str | None], argv: list[str]) -> list[str]:
    """``env -u NAME ...`` before ``argv`` for the names the process must not have: inside a container the image's
    ENV would set them again after srun's environment dropped them."""
    names = sorted(k for k, v in env.items() if v is None)
    return ["env", *(a for k in names for a in ("-u", k)), *argv] if names else argv


# A stand-in's node-local disks (slurm.node_local): the step runs in a mount namespace of its own in which each
# node-local path is its node's folder of this host; the session's process, outside, sees none of them. A fixed
# script: the pairs and the command follow as arguments, so nothing is spliced into shell text.
NODE_LOCAL = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
              'while [ "$1" != -- ]; do mkdir -p "$1" "$2" && mount --bind "$1" "$2" || { echo "rackbench: node-local '
              'disk $2 ($1) could not be mounted" >&2; exit 97; }; shift 2; done; shift; exec "$@"',
              "rackbench-node-local")


def node_local_argv(node_local: dict[str, str], node: str, argv: list[str]) -> list[str]:
    if not node_local:
        return argv
    pairs = [a for path, backing in node_disks(node_local, node).items() for a in (backing, path)]
    return [*NODE_LOCAL, *pairs, "--", *argv]
