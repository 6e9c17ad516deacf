"""Models the suite generates itself, cached by generator source and arguments: the embedded default's tiny Llama,
and for GPU machines a Llama large enough that the offload arm's CPU tier is used and a small Mixtral-style MoE
(expert parallelism). Each is described, number by number, in recipes/models/<alias>.yaml."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.tools import TINY_MODEL

GENERATOR = TINY_MODEL
GENERATE_S = 1800          # a first generation takes 1-3 minutes on 2 busy cores; past this it is stuck
# recipe model.path alias -> generator arguments
GENERATED = {
    "tiny-llama": ["--seed", "0"],
    # 771,819,520 parameters: 16 x (attention 12,582,912 + MLP 34,603,008 + norms 4,096) + embeddings 16,777,216
    "llama-770m": ["--seed", "0", "--hidden", "2048", "--layers", "16", "--heads", "16", "--kv-heads", "8",
                   "--intermediate", "5632", "--max-positions", "16384"],
    # 7,013,142,528 parameters: 32 x (attention 41,943,040 + MLP 176,160,768 + norms 8,192) + embeddings 33,554,432;
    # the shape that kept an H200 busy (#34: 99% utilisation, 651 W of 700 W at c8 with CUDA graphs)
    "llama-7b": ["--seed", "0", "--hidden", "4096", "--layers", "32", "--heads", "32", "--kv-heads", "8",
                 "--intermediate", "14336", "--max-positions", "16384"],
    # 8 experts, top-2: the DP x EP layouts of the GB200 profiles in miniature
    "moe-mini": ["--seed", "0", "--hidden", "512", "--layers", "8", "--heads", "8", "--kv-heads", "4",
                 "--intermediate", "1024", "--experts", "8", "--top-k", "2", "--max-positions", "8192"],
}


def cache_root() -> Path:
    return Path(os.environ.get("RACKBENCH_CACHE", Path.home() / ".cache" / "rackbench")) / "models"


def cached_path(alias: str) -> Path:
    """Where generated model ``alias`` lives (whether or not it has been generated yet)."""
    key = hashlib.sha256(GENERATOR.read_bytes() + repr(GENERATED[alias]).encode()).hexdigest()[:12]
    return cache_root() / f"{alias}-{key}"


def ensure_model(alias: str, python: str, log: Path) -> Path:
    """The directory of generated model ``alias``; generated with ``python`` (the serving venv) if not cached."""
    args = GENERATED[alias]
    out = cached_path(alias)
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{alias}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # xdist workers generate it once
        if not (out / "config.json").is_file():
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "wb") as fh:
                done = subprocess.Popen([python, str(GENERATOR), str(out), *args], stdout=fh,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                try:        # through poll: a first generation takes a minute or two, and says so while it runs
                    poll(lambda: Done(done.returncode) if done.poll() is not None else "generating", timeout=GENERATE_S,
                         interval=1.0, what=f"the generated model {alias} (first use; cached afterwards)")
                except PollTimeout:
                    done.kill()
                    done.wait()
            if done.returncode != 0:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                raise RuntimeError(f"generating model {alias} failed ({python} {GENERATOR}); {log}:\n{tail}")
    return out
