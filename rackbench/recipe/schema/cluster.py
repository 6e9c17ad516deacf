"""The cluster description (``recipes/clusters/<name>.yaml``): its nodes and GPUs, the backend that holds them, and
how server processes start there.

``backend`` names a registered cluster backend (rackbench.core.entry_points: ``slurm``, ``local``, or a site's);
the catalog refuses a name no backend is registered under. ``slurm:`` is the Slurm backend's own section.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt

from rackbench.recipe.schema.sweep import EnvName, OneLine, _Strict

class SlurmAccess(_Strict):
    """The Slurm backend's own section: where jobs go, how steps run (pyxis), what the real cluster's nodes have."""

    partition: OneLine | None = Field(None, description="sbatch --partition (unset: the cluster's default; a "
                                      "recipe's slurm.partition wins)")
    account: OneLine | None = Field(None, description="sbatch --account (a recipe's slurm.account wins)")
    pyxis: StrictBool = Field(False, description="every step runs in the recipe's image through pyxis + enroot "
                              "(srun --container-image)")
    images: dict[OneLine, OneLine] = Field(
        default_factory=dict, description="pyxis: a recipe's image name -> the squashfs file of it on storage every "
        "node reads (made once: `enroot import -o FILE docker://NAME`); srun names the file, so no step pulls and "
        "imports the image again (unmapped: pyxis imports it in every step)")
    gres: OneLine = Field("gpu", description="the generic resource the GPUs are requested as (--gpus-per-node)")
    drop: list[str] = Field(default_factory=list, description="recipe sbatch_directives / srun_options this "
                            "cluster cannot honour (a stand-in's small nodes, no pyxis); dropped and reported")
    node_local: dict[OneLine, OneLine] = Field(
        default_factory=dict, description="a stand-in's node-local disks: path every step sees -> the folder of this "
        "host that backs it on each node ({node}: the node's name); the session's own process does not see them, "
        "as a login node does not see a compute node's NVMe")
    login_sees: list[OneLine] = Field(
        default_factory=list, description="folders the login node shares with the nodes (shared storage, e.g. "
        "/mnt/lustre01): every container mount source and image file under one is looked for from the login node "
        "before sbatch, so a missing one is said before the queue wait, not after it")
    orphan_after_s: StrictInt = Field(
        180, ge=20, description="the holder job ends itself once the session's heartbeat (a file in the profile "
        "folder the session rewrites every orphan_after_s/6 s) has not changed for this long: a session killed "
        "with SIGKILL, a lost login shell or CI runner gives its nodes back within this bound, not the time limit")
    release_wait_s: StrictInt = Field(
        30, ge=1, description="how long a session waits after scancel for its job to end before it reports the job "
        "stuck (a node that does not answer its controller) with what to do; at least the cluster's KillWait "
        "(`scontrol show config`) plus a margin")


class Network(_Strict):
    """Interfaces for NCCL/Gloo; None = detected on the node at launch."""

    nccl_socket_ifname: str | None = Field(None, description="NCCL_SOCKET_IFNAME of every worker (null: the "
                                           "interface of the node's address, detected on the node at launch)")
    gloo_socket_ifname: str | None = Field(None, description="GLOO_SOCKET_IFNAME likewise (null: detected)")


class Infra(_Strict):
    """Where etcd and NATS come from when the cluster's discovery is etcd (the model image may not carry them)."""

    image: OneLine | None = Field(None, description="pyxis: run etcd/NATS in this image instead of the recipe's")
    etcd: list[OneLine] = Field(["etcd"], description="argv prefix of etcd on the head node")
    nats_server: list[OneLine] = Field(["nats-server"], description="argv prefix of nats-server on the head node")


class Client(_Strict):
    """Where the load generator runs and what it runs with. ``head``: an srun step on the head compute node, as the
    seed and srt-slurm run their clients (the model and the staged corpus are where that node sees them); ``login``:
    the session's own host (only where that host sees the model, the corpus and the servers' ports)."""

    placement: Literal["head", "login"] = Field("head", description="head: an srun step on the head node; login: "
                                                "the session's own host")
    python: OneLine = Field(".venvs/aiperf/bin/python", description="interpreter of the client's step (AIPerf's "
                            "venv on shared storage, or python3 in an image); relative = the repo")
    executable: list[OneLine] | None = Field(None, description="the load generator's command as the client sees it "
                                             "(unset: the generator's own, e.g. .venvs/aiperf/bin/aiperf)")
    install: list[OneLine] = Field(default_factory=list, description="pip requirements of the client's environment, "
                                   "made once in the shared cache by the first client step that lacks it (an image "
                                   "without AIPerf: aiperf==0.13.0)")
    constraints: OneLine | None = Field(None, description="the pins of that environment: a file of rackbench/tools/"
                                        "pins/ (pip constraints: every version), required with install")
    image: OneLine | None = Field(None, description="pyxis: run the client in this image (unset: the recipe's)")
    cache: OneLine | None = Field(None, description="shared cache as the client sees it: HF_HOME (tokenizer, staged "
                                  "corpus) and AIPerf's dataset mmap cache, reused by every point (unset: the results "
                                  "folder's .hf-cache)")
    tmpdir: OneLine = Field("/tmp", description="node-local folder for AIPerf's IPC sockets (TMPDIR)")


class Runtime(_Strict):
    """How server processes are started on this cluster's nodes."""

    python: OneLine = Field("python3", description="interpreter for dynamo.frontend / dynamo.vllm (relative = repo)")
    vllm_serve: list[OneLine] = Field(["vllm", "serve"], description="argv prefix of a plain vLLM server")
    discovery: Literal["etcd", "file"] = Field(
        "etcd", description="Dynamo discovery: etcd + NATS on the head node, or a shared directory")
    environment: dict[EnvName, OneLine | None] = Field(
        default_factory=dict, description="added to every server process; null unsets a variable")
    node_environment: list[dict[EnvName, OneLine]] = Field(
        default_factory=list, description="per node rank: added to that node's worker (e.g. CPU core binding)")
    model_paths: dict[str, OneLine] = Field(
        default_factory=dict, description="recipe model.path alias -> directory on the nodes; a model's draft "
        "(its draft_model name, e.g. Inferact/Kimi-K3-DSpark) -> where `rackbench stage` downloads it")
    container_model_dir: str = Field("/model", description="where a container sees the model directory "
                                     "(srt-slurm's mount point)")
    container_mounts: dict[OneLine, OneLine] = Field(default_factory=dict, description="with containers: more host "
                                                     "paths every process sees (host -> inside), e.g. a staged draft "
                                                     "model; relative = a folder of the repo on shared storage, seen "
                                                     "at its own path")
    flag_table: str = Field("dynamo-1.6.1_vllm-0.31.0",
                            description="rackbench/data/flags/<name>.json: flags each entrypoint accepts")
    dynamo_install: StrictBool = Field(
        True, description="run the recipe's dynamo.install on every node; false where the environment stands in "
                          "for the image and carries its own Dynamo (preflight then reports the version it finds)")
    infra: Infra = Infra()
    model_load_gib_per_s: float | None = Field(None, gt=0, le=1000, description="how fast each node reads its share of "
                                               "the checkpoint (measured or declared): the time budget's model load")
    startup_s: StrictInt = Field(600, ge=0, le=86400, description="engine start after the weights are read (graph "
                                 "capture, warmup): part of the time budget's model load")
    client: Client = Client()


class Cost(_Strict):
    """What the cluster's GPU time costs, for the cost per token of each point (never assumed: no default)."""

    gpu_hour: float = Field(gt=0, le=10_000, description="price of one GPU for one hour, as the site pays it")
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 code the price is in")


class ClusterSpec(_Strict):
    name: str = Field(description="the cluster's name: its file's stem, what --cluster and a profile's cluster say")
    description: str = Field("", description="one line for people: what the machines are")
    kind: Literal["gpu", "embedded"] = Field(description="gpu: a GPU cluster (its cases are marked hardware and "
                                             "<gpu_type>); embedded: this machine's own default (marked local)")
    backend: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", description="a registered cluster backend: slurm, local, "
                         "or a site's (entry point group rackbench.backends)")
    backend_options: dict[str, Any] = Field(default_factory=dict, description="a site backend's own settings")
    gpu_type: str = Field(pattern=r"^[a-z0-9]+$", description="the GPU's name in markers and case ids (gb200, "
                          "h200, cpu)")
    runners: list[str] = Field([], description="the seed's runner names of this cluster (InferenceX's runner pool)")
    nodes: StrictInt = Field(gt=0, description="nodes a job may span")
    gpus_per_node: StrictInt = Field(gt=0, description="GPUs of one node (a profile's layout must fit them)")
    hbm_gib_per_gpu: float = Field(gt=0, description="GPU memory in GiB, as nvidia-smi reports it (the capacity "
                                   "check's budget)")
    host_dram_mib_per_node: StrictInt = Field(gt=0, description="host memory a node offers its jobs in MiB (the "
                                              "CPU KV offload's budget)")
    dram_utilization: float = Field(gt=0, le=1, description="share of that memory the CPU KV offload may take")
    slurm: SlurmAccess = SlurmAccess()
    network: Network = Network()
    runtime: Runtime = Runtime()
    cost: Cost | None = Field(None, description="the price per GPU-hour: each point then reports its cost per million "
                              "tokens")

    @property
    def markers(self) -> list[str]:
        if self.kind == "gpu":
            return ["hardware", self.gpu_type]
        return ["local"] + ([self.backend] if self.backend != "local" else [])

    @property
    def dram_budget_bytes_per_node(self) -> float:
        return self.host_dram_mib_per_node * 2**20 * self.dram_utilization
