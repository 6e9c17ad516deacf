#!/usr/bin/env python3
"""Check AIPerf's client environment where the client runs (the head node, in its step and container, after the
client's preamble: its install and the tokenizer's offline copy), before any weights load.

    python3 client_check.py REQUEST_JSON

REQUEST: {"node", "version"?, "args", "tokenizer", "model"?, "trust_remote_code", "dataset"?, "cache", "stage"}, where
``args`` is the first point's `aiperf profile` argument list (null where it reads a trace the point writes) and ``stage`` the command that stages the corpus. The
environment is the point's own (HF offline, HF_HOME on the shared cache). Checks: AIPerf imports, at the pinned
version, and parses the point's command; the tokenizer loads offline and is not empty; the corpus loads offline
from the cache; the cache is writable. The answer is one JSON line {"problems": [...], "notes": [...]}, each
problem {"kind", "check", "message", "fix"} (kinds: client, tokenizer, corpus, cache). Stand-alone on purpose: it
runs with the client's interpreter, where rackbench is not installed.
"""

import json
import os
import sys
import tempfile

from aiperf_check import check as parse_command   # beside this file (a script's folder is on sys.path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def check_aiperf(req: dict, problems: list, notes: list) -> bool:
    try:
        import aiperf
    except Exception as exc:  # noqa: BLE001
        problems.append({"kind": "client", "check": "aiperf import", "message": f"AIPerf does not import here: "
                         f"{_first_line(exc)}", "fix": "install it into the client's environment "
                         "(runtime.client.install or a venv on shared storage: runtime.client.python)"})
        return False
    have, want = getattr(aiperf, "__version__", "?"), req.get("version")
    if want and have != want:
        problems.append({"kind": "client", "check": "aiperf version", "message": f"aiperf {have} here, the profile "
                         f"pins {want}", "fix": f"install aiperf=={want} where the client runs"})
    if req.get("args") is None:      # parse_args(None) would parse this script's own argv
        notes.append("aiperf command: parsed when the point runs (its input trace is written then)")
        return True
    error = parse_command(req["args"])          # aiperf_check.py beside this file: AIPerf's parser and planner
    if error:
        problems.append({"kind": "client", "check": "aiperf command", "message": "the point's command does not parse "
                         f"with the AIPerf here: {error}", "fix": "match the client's AIPerf to the pin"})
    return True


def check_tokenizer(req: dict, problems: list, notes: list) -> None:
    if req.get("model") and not os.path.isdir(req["model"]):
        notes.append(f"tokenizer {req['tokenizer']}: not checked (the model directory {req['model']} is missing "
                     "here, so its offline copy could not be made)")
        return
    try:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(req["tokenizer"], trust_remote_code=req.get("trust_remote_code", False))
        ids = tok.encode("def add(a, b): return a + b")
    except Exception as exc:  # noqa: BLE001
        problems.append({"kind": "tokenizer", "check": "tokenizer", "message": f"{req['tokenizer']} does not load "
                         f"offline here: {_first_line(exc)}", "fix": "check the tokenizer step in the client's log"})
        return
    if not ids or not len(tok):
        problems.append({"kind": "tokenizer", "check": "tokenizer", "message": f"{req['tokenizer']} loads but is "
                         "empty (no tokens for a line of code)", "fix": "stage a complete tokenizer with the model"})


def check_corpus(req: dict, problems: list, notes: list) -> None:
    alias = req.get("dataset")
    if not alias:
        return
    try:
        from aiperf.plugin import plugins
        meta = plugins.get_public_dataset_loader_metadata(alias)
    except Exception as exc:  # noqa: BLE001
        problems.append({"kind": "corpus", "check": "corpus", "message": f"AIPerf knows no public dataset {alias!r}: "
                         f"{_first_line(exc)}", "fix": "name one of AIPerf's public datasets in profile.load.dataset"})
        return
    try:
        import datasets
        datasets.disable_progress_bars()
        ds = datasets.load_dataset(meta.hf_dataset_name, name=meta.hf_subset, split=meta.hf_split)
    except Exception as exc:  # noqa: BLE001
        problems.append({"kind": "corpus", "check": "corpus", "message": f"{alias} ({meta.hf_dataset_name}) does not "
                         f"load offline from {os.environ.get('HF_HOME', '~/.cache/huggingface')}: {_first_line(exc)}",
                         "fix": f"stage it once from a machine that reaches the Hub: {req['stage']}"})
        return
    notes.append(f"corpus {alias}: {len(ds)} rows offline from the cache")


def check_cache(req: dict, problems: list) -> None:
    try:
        os.makedirs(req["cache"], exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=req["cache"], prefix=".rackbench-write-"):
            pass
    except OSError as exc:
        problems.append({"kind": "cache", "check": "shared cache", "message": f"{req['cache']} is not writable here: "
                         f"{_first_line(exc)}", "fix": "point runtime.client.cache at shared storage the client can "
                         "write (AIPerf keeps its dataset mmap cache there)"})


def main() -> None:
    req = json.loads(sys.argv[1])
    problems, notes = [], []
    check_cache(req, problems)
    if check_aiperf(req, problems, notes):
        check_tokenizer(req, problems, notes)
        check_corpus(req, problems, notes)
    print(json.dumps({"node": req.get("node"), "problems": problems, "notes": notes}), flush=True)


if __name__ == "__main__":
    main()
