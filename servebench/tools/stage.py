#!/usr/bin/env python3
"""Stage what AIPerf reads offline into a cache: the public corpora (and tokenizers whose model directory this host
sees), once, from a machine that reaches the Hugging Face Hub.

    python3 stage.py REQUEST_JSON

REQUEST: {"datasets": [AIPerf public dataset names], "tokenizers": [{"model", "name"}], "cache"}. The environment
names the cache (HF_HOME, HF_DATASETS_CACHE), online. Each corpus is loaded as AIPerf loads it (its registered HF
repo and split), so AIPerf later finds it there with HF offline. Exit 3, with one line, when the Hub cannot be
reached from here; exit 2 for a name AIPerf does not know. Stand-alone on purpose: it runs with AIPerf's interpreter,
where servebench is not installed.
"""

import json
import subprocess
import sys
from pathlib import Path


def main() -> None:
    req = json.loads(sys.argv[1])
    from aiperf.plugin import plugins
    import datasets

    for tok in req.get("tokenizers", []):
        done = subprocess.run([sys.executable, str(Path(__file__).with_name("tokenizer_cache.py")), tok["model"],
                               req["cache"], tok["name"]], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(done.stderr.strip() or f"tokenizer_cache failed with {done.returncode}")
        print(f"stage: tokenizer {done.stdout.strip()} from {tok['model']}", flush=True)
    for alias in req.get("datasets", []):
        try:
            meta = plugins.get_public_dataset_loader_metadata(alias)
        except Exception as exc:  # noqa: BLE001
            print(f"stage: AIPerf knows no public dataset {alias!r} ({type(exc).__name__})", file=sys.stderr)
            sys.exit(2)
        try:
            ds = datasets.load_dataset(meta.hf_dataset_name, name=meta.hf_subset, split=meta.hf_split)
        except Exception as exc:  # noqa: BLE001
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"stage: {alias} ({meta.hf_dataset_name}) could not be fetched from here: {type(exc).__name__}: "
                  f"{text}", file=sys.stderr, flush=True)
            sys.exit(3)
        print(f"stage: {alias} ({meta.hf_dataset_name}, split {meta.hf_split}): {len(ds)} rows in "
              f"{req['cache']}", flush=True)


if __name__ == "__main__":
    main()
