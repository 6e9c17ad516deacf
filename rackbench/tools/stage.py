#!/usr/bin/env python3
"""Stage what AIPerf reads offline into a cache: the public corpora (and tokenizers whose model directory this host
sees), once, from a machine that reaches the Hugging Face Hub.

    python3 stage.py REQUEST_JSON

REQUEST: {"datasets": [AIPerf public dataset names], "tokenizers": [{"model", "name"}], "cache", "models":
[{"repo", "dest"}], "hub_tokenizers": [repo ids of hf: models]}. Each model (a draft the servers read from shared
storage) is downloaded whole into a folder of its own beside ``dest`` and renamed into place, under a lock; a
complete one there is left alone, and an incomplete one is said, never removed. The environment
names the cache (HF_HOME, HF_DATASETS_CACHE), online. Each corpus is loaded as AIPerf loads it (its registered HF
repo and split), so AIPerf later finds it there with HF offline. Exit 3, with one line, when the Hub cannot be
reached from here; exit 2 for a name AIPerf does not know. Stand-alone on purpose: it runs with AIPerf's interpreter,
where rackbench is not installed.
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shared_lock import shared_lock       # beside this file (a script's folder is on sys.path)


class Unstaged(Exception):
    def __init__(self, code: int, why: str):
        super().__init__(why)
        self.code = code


def first_line(exc: Exception) -> str:
    """``Type: its first line``: what a Hub or network error says, on one line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def stage_model(repo: str, dest: str) -> str:
    """``repo`` from the Hub into ``dest`` (a whole snapshot), unless a complete one is there."""
    parent = os.path.dirname(dest.rstrip("/")) or "."
    if not os.path.isdir(parent):          # not this cluster's storage: nothing is made on the wrong machine
        raise Unstaged(2, f"{parent} does not exist here, so {repo} has nowhere to go: run this where the "
                          "cluster's shared storage is mounted (its login node), or make the folder")
    with os.fdopen(shared_lock(dest.rstrip("/") + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(dest, "config.json")):
            return f"model {repo}: already in {dest}"
        if os.path.exists(dest):
            raise Unstaged(2, f"{dest} exists but holds no config.json, so it is not a whole {repo}: move it aside "
                              "and stage again (nothing in it was touched)")
        from huggingface_hub import snapshot_download
        tmp = tempfile.mkdtemp(dir=parent, prefix=os.path.basename(dest.rstrip("/")) + ".", suffix=".tmp")
        try:
            try:
                snapshot_download(repo, local_dir=tmp)
            except Exception as exc:  # noqa: BLE001
                raise Unstaged(3, f"{repo} could not be fetched from here: {first_line(exc)}") from None
            shutil.rmtree(os.path.join(tmp, ".cache"), ignore_errors=True)    # huggingface_hub's own bookkeeping
            os.chmod(tmp, 0o755)
            os.rename(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return f"model {repo}: {dest}"


def main() -> None:
    req = json.loads(sys.argv[1])
    failed = 0
    # the draft models, then an hf: model's tokenizer (where AIPerf looks for it offline): each said, and the
    # corpora are staged all the same
    for stage, args in [*((stage_model, (m["repo"], m["dest"])) for m in req.get("models", [])),
                        *((hub_tokenizer, (repo,)) for repo in req.get("hub_tokenizers", []))]:
        try:
            print("stage: " + stage(*args), flush=True)
        except Unstaged as why:
            print(f"stage: {why}", file=sys.stderr, flush=True)
            failed = max(failed, why.code)
    if req.get("datasets") or req.get("tokenizers"):
        corpora(req)
    sys.exit(failed)


# a tokenizer's files, and the code of a remote-code one (its modules and the modules they import)
TOKENIZER_FILES = ["*.json", "*.model", "*.tiktoken", "*.txt", "*.py", "tokenizer*"]


def hub_tokenizer(repo: str) -> str:
    """The tokenizer files of Hub repo ``repo`` into the HF cache the environment names (HF_HUB_CACHE)."""
    from huggingface_hub import snapshot_download
    try:
        where = snapshot_download(repo, allow_patterns=TOKENIZER_FILES)
    except Exception as exc:  # noqa: BLE001
        raise Unstaged(3, f"the tokenizer of {repo} could not be fetched from here: {first_line(exc)}") from None
    return f"tokenizer {repo} (hf: model) in {where}"


def hub_silent() -> str | None:
    """Why the Hub's endpoint does not answer from here (one request, 10 s at most), or None when it answers at all
    (any HTTP status: a proxy's refusal is the loader's to report). The corpora's loader retries a refused
    connection five times with backoff, ~23 s before it says so; this says it at once."""
    import urllib.error
    import urllib.request
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=10).close()
    except urllib.error.HTTPError:
        return None
    except OSError as exc:                        # URLError, a timeout, a refused or reset connection
        return f"{endpoint} does not answer ({first_line(exc)})"
    return None


def corpora(req: dict) -> None:
    from aiperf.plugin import plugins
    import datasets

    for tok in req.get("tokenizers", []):
        done = subprocess.run([sys.executable, str(Path(__file__).with_name("tokenizer_cache.py")), tok["model"],
                               req["cache"], tok["name"]], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(done.stderr.strip() or f"tokenizer_cache failed with {done.returncode}")
        print(f"stage: tokenizer {done.stdout.strip()} from {tok['model']}", flush=True)
    silent = hub_silent() if req.get("datasets") else None       # asked once for all the corpora
    for alias in req.get("datasets", []):
        try:
            meta = plugins.get_public_dataset_loader_metadata(alias)
        except Exception as exc:  # noqa: BLE001
            print(f"stage: AIPerf knows no public dataset {alias!r} ({type(exc).__name__})", file=sys.stderr)
            sys.exit(2)
        try:
            if silent:
                raise ConnectionError(silent)
            ds = datasets.load_dataset(meta.hf_dataset_name, name=meta.hf_subset, split=meta.hf_split)
        except Exception as exc:  # noqa: BLE001
            print(f"stage: {alias} ({meta.hf_dataset_name}) could not be fetched from here: {first_line(exc)}",
                  file=sys.stderr, flush=True)
            sys.exit(3)
        print(f"stage: {alias} ({meta.hf_dataset_name}, split {meta.hf_split}): {len(ds)} rows in "
              f"{req['cache']}", flush=True)


if __name__ == "__main__":
    main()
