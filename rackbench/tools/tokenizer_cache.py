#!/usr/bin/env python3
"""Put a model's tokenizer into an offline Hugging Face cache, where the load generator runs.

    python3 tokenizer_cache.py MODEL_DIR CACHE NAME

Copies the tokenizer's files (and the remote code a trust-remote-code tokenizer imports, with every sibling module
that code imports relatively, as transformers' dynamic loader needs them beside it) from MODEL_DIR into CACHE/hub as
the repo ``local/NAME`` and prints that id. Several clients filling one shared cache at once (two profiles under
xdist, two users) each copy into a temporary folder of their own, under a lock on the repo, and rename it into
place whole: a reader sees a complete snapshot or none. AIPerf 0.13.0 rejects a directory path whenever it loads
tokenizers offline; a cached repo id works. It runs in the client's own step (on the head node, where the model is),
so a model on node-local disk that the login host cannot see is no obstacle. Exit 2, with one line saying what was
looked for, when MODEL_DIR holds no tokenizer or only empty files: AIPerf would start and fail only after the model
loaded. Stand-alone on purpose: it runs with the client's interpreter, where rackbench is not installed.
"""

import ast
import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from shared_lock import shared_lock       # beside this file (a script's folder is on sys.path)

# tokenizer files by name or pattern (sentencepiece/tiktoken models, vocabularies, chat templates, remote code)
PATTERNS = ("tokenizer*", "special_tokens_map.json", "added_tokens.json", "chat_template*", "config.json",
            "generation_config.json", "vocab*", "merges.txt", "*.model", "*.tiktoken", "tokenization_*.py",
            "configuration_*.py")
UMASK = os.umask(0o022)
os.umask(UMASK)
CORE = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tiktoken.model", "vocab.json")


def siblings(module: Path, model_dir: Path, seen: set[Path]) -> None:
    """Add to ``seen`` every module of ``model_dir`` that ``module`` imports relatively (``from .x import y``,
    ``from . import x``), and theirs in turn."""
    try:
        tree = ast.parse(module.read_text(errors="replace"))
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            names = [node.module] if node.module else [a.name for a in node.names]
            for name in names:
                found = model_dir / (name.split(".")[0] + ".py")
                if found.is_file() and found not in seen:
                    seen.add(found)
                    siblings(found, model_dir, seen)


def files(model_dir: Path) -> list[Path]:
    found = {p for pattern in PATTERNS for p in model_dir.glob(pattern) if p.is_file()}
    for module in [p for p in found if p.suffix == ".py"]:
        siblings(module, model_dir, found)
    return sorted(found)


def _replace(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o666 & ~UMASK)                    # readable by the cache's other users, as open() would make it
    os.replace(tmp, path)


def cache(model_dir: Path, cache_dir: Path, name: str) -> str:
    chosen = files(model_dir)
    core = [f for f in chosen if f.name in CORE or f.suffix in (".model", ".tiktoken")]
    if not core or all(f.stat().st_size == 0 for f in core):
        what = "only empty files" if core else "no tokenizer"
        raise SystemExit(f"tokenizer_cache: {what} in {model_dir} as this host sees it (looked for "
                         f"{', '.join(CORE)}): the load generator would start and fail only after the model loaded")
    digest = hashlib.sha1(b"".join(f.name.encode() + f.read_bytes() for f in chosen)).hexdigest()
    repo = cache_dir / "hub" / f"models--local--{name}"
    snap = repo / "snapshots" / digest
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    snap.parent.mkdir(parents=True, exist_ok=True)
    # one writer per repo; the others find it done. Read-only and 0666: any user of the shared cache can take it
    with os.fdopen(shared_lock(repo / ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((snap / f.name).is_file() for f in chosen):
            tmp = Path(tempfile.mkdtemp(dir=snap.parent, prefix=f".{digest}.", suffix=".tmp"))
            os.chmod(tmp, 0o777 & ~UMASK)            # as a folder made by mkdir (mkdtemp's is private)
            for f in chosen:
                shutil.copy2(f, tmp / f.name)
            shutil.rmtree(snap, ignore_errors=True)
            tmp.rename(snap)
        _replace(repo / "refs" / "main", digest)
    return f"local/{name}"


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: tokenizer_cache.py MODEL_DIR CACHE NAME")
    try:
        print(cache(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]), flush=True)
    except SystemExit as err:
        print(err, file=sys.stderr, flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
