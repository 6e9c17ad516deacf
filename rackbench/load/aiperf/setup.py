"""What AIPerf needs around its command, where the client runs: the tokenizer in an offline HF-cache layout (a step
of the client's preamble: rackbench/tools/tokenizer_cache.py, on the node that sees the model), and an environment
that keeps its caches and sockets where they belong."""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

from rackbench.cluster.request import model_argument
from rackbench.load.generator import LoadJob
from rackbench.tools import TOKENIZER_CACHE, in_folder

AIPERF_CONFIGURE_S = 600       # AIPerf 0.13.0's AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT default


def tokenizer_id(job: LoadJob) -> str:
    """The tokenizer AIPerf is given: the offline copy's repo id; for an ``hf:`` model no node has a directory of,
    its Hub repo id (`rackbench stage` puts its tokenizer in the shared cache); else the served model's name."""
    if job.client.model:
        return f"local/{job.point.profile.spec.model}"
    return hub_repo(job.point.profile) or job.model_name


def hub_repo(profile) -> str | None:
    """The Hub repo id of an ``hf:org/name`` model the cluster maps to no directory (the engine downloads it)."""
    if not profile.recipe.model.path.startswith("hf:"):
        return None
    model = model_argument(profile, False)[0]
    return None if model.startswith("/") else model


def tmpdir(job: LoadJob) -> str:
    """A short folder of the point's own on the client's node: AIPerf puts its ZMQ IPC sockets in TMPDIR, and a
    socket path longer than 107 bytes (a deep results folder) makes every service fail while AIPerf exits 0."""
    digest = hashlib.sha1(f"{job.case.root}|{job.run_id}".encode()).hexdigest()[:12]
    return f"{job.client.tmpdir.rstrip('/')}/sb-aiperf-{digest}"


def steps(job: LoadJob) -> tuple[dict, ...]:
    """Made where the client runs, before AIPerf starts: its folders, then the tokenizer's offline copy from the
    model directory as that node sees it (a node-local model is no obstacle; one with no tokenizer stops here)."""
    c = job.client
    folders = [tmpdir(job), str(job.case.load_work("aiperf"))]
    if not c.model:
        return ({"name": "folders", "mkdir": folders},)
    return ({"name": "tokenizer", "argv": [c.python, in_folder(c.tools, TOKENIZER_CACHE), c.model, c.cache,
                                           job.point.profile.spec.model], "mkdir": folders},)


def cache_env(cache: PurePosixPath) -> dict[str, str]:
    """Where Hugging Face keeps what AIPerf reads (tokenizers, corpora) in the shared cache: the same for the points
    (offline) and for ``rackbench stage`` (online), so what one stages the other finds."""
    return {"HF_HOME": str(cache), "HF_HUB_CACHE": str(cache / "hub"), "HF_DATASETS_CACHE": str(cache / "datasets")}


def environment(job: LoadJob) -> dict[str, str]:
    """Offline from the shared cache: the tokenizer and a staged corpus from HF_HOME, AIPerf's dataset mmap cache
    there too (content-addressed: every point of a corpus reuses it instead of re-tokenizing); the dataset's
    configuration may take ``load.dataset_timeout_s`` (AIPerf's own 300/600 s are too short for the seed corpus)."""
    cache, work = job.cache, job.case.load_work("aiperf")
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **cache_env(cache), "TMPDIR": tmpdir(job), "AIPERF_DATASET_MMAP_BASE_PATH": str(work),
           "AIPERF_DATASET_MMAP_CACHE_DIR": str(PurePosixPath(cache) / "aiperf-mmap"),
           "XDG_CACHE_HOME": str(work / "cache"), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    timeout = job.point.profile.spec.load.dataset_timeout_s
    if timeout:
        env.update({"AIPERF_DATASET_CONFIGURATION_TIMEOUT": str(timeout),
                    "AIPERF_DATASET_PUBLIC_DATASET_TIMEOUT": str(timeout),
                    "AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT": str(max(timeout, AIPERF_CONFIGURE_S))})
    return env
