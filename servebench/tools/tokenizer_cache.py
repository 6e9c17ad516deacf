#!/usr/bin/env python3
"""Put a model's tokenizer into an offline Hugging Face cache, where the load generator runs.

    python3 tokenizer_cache.py MODEL_DIR CACHE NAME

Copies the tokenizer's files (and the remote code a trust-remote-code tokenizer imports) from MODEL_DIR into
CACHE/hub as the repo ``local/NAME`` and prints that id. AIPerf 0.13.0 rejects a directory path whenever it loads
tokenizers offline; a cached repo id works. It runs in the client's own step (on the head node, where the model is),
so a model on node-local disk that the login host cannot see is no obstacle. Exit 2, with one line saying what was
looked for, when MODEL_DIR holds no tokenizer or only empty files: AIPerf would start and fail only after the model
loaded. Stand-alone on purpose: it runs with the client's interpreter, where servebench is not installed.
"""

import hashlib
import shutil
import sys
from pathlib import Path

# tokenizer files by name or pattern (sentencepiece/tiktoken models, vocabularies, chat templates, remote code)
PATTERNS = ("tokenizer*", "special_tokens_map.json", "added_tokens.json", "chat_template*", "config.json",
            "generation_config.json", "vocab*", "merges.txt", "*.model", "*.tiktoken", "tokenization_*.py",
            "configuration_*.py")
CORE = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tiktoken.model", "vocab.json")


def files(model_dir: Path) -> list[Path]:
    found = {p for pattern in PATTERNS for p in model_dir.glob(pattern) if p.is_file()}
    return sorted(found)


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
    if not all((snap / f.name).is_file() for f in chosen):
        tmp = snap.with_name(digest + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in chosen:
            shutil.copy2(f, tmp / f.name)
        shutil.rmtree(snap, ignore_errors=True)
        tmp.rename(snap)
    (repo / "refs").mkdir(exist_ok=True)
    ref = repo / "refs" / "main"
    part = ref.with_name("main.tmp")
    part.write_text(digest)
    part.replace(ref)
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
