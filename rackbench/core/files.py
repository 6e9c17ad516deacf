"""Files a user keeps: written atomically (a reader sees the old file or the new one, never half of it), read
strictly (JSON without NaN or Infinity), and a disk that refuses a write is said in one line naming the file."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


FULL_OR_READ_ONLY = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                     errno.EROFS: "the file system is read-only"}


class DiskError(OSError):
    """A file could not be written: the message names the file and the cause in one line, and what was there
    before is still there."""

    def __init__(self, path: Path, err: OSError):
        self.path = Path(path)
        cause = {**FULL_OR_READ_ONLY, errno.EACCES: "permission denied",
                 errno.EPERM: "permission denied"}.get(err.errno, err.strerror or str(err))
        super().__init__(err.errno, f"cannot write {path}: {cause}")


def disk_problem(err: BaseException) -> str | None:
    """One line for a write the disk refused (full, over quota, read-only), wherever it was raised; None for any
    other error."""
    if isinstance(err, DiskError):
        return err.strerror
    if isinstance(err, OSError) and err.errno in FULL_OR_READ_ONLY:
        where = Path(err.filename) if isinstance(err.filename, (str, os.PathLike)) else None
        if where is not None and not where.exists():     # a folder it could not make: say where it would have been
            within = next((p for p in where.parents if p.exists()), None)
            return f"cannot create {where}" + (f" in {within}" if within else "") + \
                f": {FULL_OR_READ_ONLY[err.errno]}"
        return f"cannot write {err.filename}: {FULL_OR_READ_ONLY[err.errno]}"
    return None


def write_atomic(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder, synced, then renamed over it."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)      # as an ordinary file would be (mkstemp makes it 0600)
        os.replace(tmp, path)
        return path
    except OSError as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise DiskError(path, err) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def copy_atomic(src: Path | str, dst: Path | str) -> Path:
    """Copy ``src`` to ``dst`` whole or not at all: through a temporary file beside ``dst``, synced, then renamed
    over it (a disk that fills midway leaves no cut copy behind: DiskError names the file and the cause)."""
    dst = Path(dst)
    tmp = None
    fin = open(src, "rb")          # a source that cannot be read is its own error, not the disk's
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
        with fin, os.fdopen(fd, "wb") as fout:
            shutil.copyfileobj(fin, fout)
            fout.flush()
            os.fsync(fout.fileno())
        shutil.copystat(src, tmp)
        os.replace(tmp, dst)
        return dst
    except OSError as err:
        fin.close()
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise DiskError(dst, err) from None


def link_atomic(link: Path | str, target: str) -> Path:
    """Point the symbolic link ``link`` at ``target`` (made beside it, then renamed over it: a reader sees the old
    target or the new one)."""
    link = Path(link)
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        os.symlink(target, tmp)
        os.replace(tmp, link)
        return link
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise DiskError(link, err) from None


def write_json(path: Path | str, data: Any, indent: int = 1) -> Path:
    """JSON written atomically; NaN or infinity never reach the file (ValueError instead)."""
    return write_atomic(path, json.dumps(data, indent=indent, allow_nan=False) + "\n")


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number (rackbench writes null for a value it could not measure)")


# What a JSON file rackbench reads may be: results, searches, manifests and baselines are a few MB and a few levels
# deep; a file past either bound is not one rackbench wrote, and is refused before it is walked.
MAX_JSON_BYTES = 256 * 2**20
MAX_JSON_DEPTH = 64


def json_depth(data: Any) -> int:
    """How deeply ``data`` nests lists and objects (iteratively: a hostile file cannot exhaust the stack)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                return deepest
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
                        if isinstance(v, (dict, list)))
    return deepest


def read_json(path: Path | str) -> Any:
    """Strict JSON from a file (NaN/Infinity refused), as untrusted input: at most MAX_JSON_BYTES, nested at most
    MAX_JSON_DEPTH levels; ValueError (one line) naming the file and what is wrong."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise ValueError(f"{path}: a dangling symlink or a symlink loop")
    if path.is_dir():
        raise ValueError(f"{path}: a folder, not a file")
    try:
        size = path.stat().st_size
        text = path.read_text(encoding="utf-8") if size <= MAX_JSON_BYTES else None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read it ({err})") from None
    if text is None:
        raise ValueError(f"{path}: {size:,} bytes, more than the {MAX_JSON_BYTES:,} a file rackbench writes can be")
    try:
        data = json.loads(text, parse_constant=_no_constants)
        depth = json_depth(data)
    except RecursionError:
        data, depth = None, MAX_JSON_DEPTH + 1
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels: not a file rackbench wrote")
    return data
