"""Strict YAML: duplicate keys anywhere are an error (PyYAML silently keeps the last one).

Every mapping remembers the line of each key, so later checks can point at the line a
value came from.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, Problem


class _Lines(dict):
    """A dict that also remembers the 1-based line of each key (in ``.lines``)."""

    lines: dict[str, int]


class _StrictLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    out = _Lines()
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise _DuplicateKey(str(key), out.lines[key], key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, again: int):
        self.key, self.first, self.again = key, first, again


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse(text: str, label: str) -> Any:
    """Parse YAML text strictly; ``label`` names the source in errors."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except _DuplicateKey as dup:
        raise ConfigError(
            Problem(
                label,
                dup.key,
                f"duplicate key (first at line {dup.first}, again at line {dup.again}); "
                "YAML would silently keep only the last value",
                "keep one of the two entries",
                line=dup.again,
            )
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise ConfigError(
            Problem(label, "", f"not valid YAML: {getattr(err, 'problem', err)}", "fix the syntax",
                    line=mark.line + 1 if mark else None)
        ) from None


def load(path: Path | str) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(Problem(str(path), "", f"not UTF-8 ({err.reason} at byte {err.start})",
                                  "save the file as UTF-8")) from None
    return parse(text, str(path))


def line_of(mapping: Any, key: str) -> int | None:
    return getattr(mapping, "lines", {}).get(key)


def plain(data: Any) -> Any:
    """Strip line bookkeeping: plain dicts and lists, for dumping and hashing."""
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [plain(v) for v in data]
    return data


def dump(data: Any) -> str:
    return yaml.safe_dump(plain(data), sort_keys=False, default_flow_style=False, width=120)


def write_atomic(path: Path | str, text: str) -> None:
    """Write text so readers see the old file or the new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
