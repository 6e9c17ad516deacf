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


# A recipe is a few hundred values; aliases may share a node many times, but the document they expand to
# (what merging, dumping and hashing walk) stays below this many values.
MAX_EXPANDED_VALUES = 100_000


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):   # libyaml when present: same rules, ~5x faster
    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_EXPANDED_VALUES:
            raise _TooLarge(size)
        return self.construct_document(node)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Values the document has once every alias is expanded (memoised per node, so linear in the file)."""
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        size = 1
    memo[id(node)] = size = min(size, 10 * MAX_EXPANDED_VALUES)
    return size


class _TooLarge(Exception):
    def __init__(self, size: int):
        self.size = size


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    """Keys written twice are an error; keys a merge key (``<<: *defaults``) brought in may be overridden."""
    explicit = [pair for pair in node.value if pair[0].tag != "tag:yaml.org,2002:merge"]
    loader.flatten_mapping(node)
    merged = node.value[:len(node.value) - len(explicit)]
    out = _Lines()
    out.lines = {}
    for key_node, value_node in merged:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    seen: dict = {}
    for key_node, value_node in node.value[len(merged):]:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise _BadKey(key_node.start_mark.line + 1) from None
        if key in seen:
            raise _DuplicateKey(str(key), seen[key], key_node.start_mark.line + 1)
        seen[key] = key_node.start_mark.line + 1
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


class _BadKey(Exception):
    def __init__(self, line: int):
        self.line = line


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
    except _TooLarge as big:
        raise ConfigError(Problem(label, "", f"aliases expand this document to more than {MAX_EXPANDED_VALUES} "
                                  f"values ({big.size} or more)", "write the values out, or alias less")) from None
    except _BadKey as bad:
        raise ConfigError(Problem(label, "", "a mapping key is itself a list or mapping", "use a plain key",
                                  line=bad.line)) from None
    except RecursionError:
        raise ConfigError(Problem(label, "", "nested too deeply", "flatten the structure")) from None
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
    except OSError as err:
        raise ConfigError(Problem(str(path), "", f"cannot read it ({err.strerror or err})",
                                  "make it a readable file")) from None
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
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)      # as an ordinary file would be (mkstemp makes it 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
