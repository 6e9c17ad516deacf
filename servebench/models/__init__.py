"""Models the suite generates itself (the embedded default), cached by generator source and arguments."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

GENERATOR = Path(__file__).with_name("tiny_gen.py")
# recipe model.path alias -> generator arguments
GENERATED = {"tiny-llama": ["--seed", "0"]}


def cache_root() -> Path:
    return Path(os.environ.get("SERVEBENCH_CACHE", Path.home() / ".cache" / "servebench")) / "models"


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
                done = subprocess.run([python, str(GENERATOR), str(out), *args], stdout=fh,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                raise RuntimeError(f"generating model {alias} failed ({python} {GENERATOR}); {log}:\n{tail}")
    return out
