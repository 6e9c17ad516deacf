"""Strict YAML: duplicate keys anywhere are an error (PyYAML, and so srtctl, silently keep the last one).

Every mapping remembers the line of each key, so later checks can point at the line a value came from. A file with
duplicate keys still parses (:func:`parse_lenient`: the last value wins, as it would have run), so the schema and
the rules judge it in the same pass; every duplicate is a problem naming its full key path, and for a JSON-valued
flag written twice the fix shows the two merged.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rackbench.core.errors import ConfigError, Problem


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
        size = _expanded_size(node, {})        # also bounds the nesting (RecursionError: "nested too deeply")
        if size > MAX_EXPANDED_VALUES:
            raise _TooLarge(size)
        self.duplicates = _duplicates(node, ())
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


@dataclass(frozen=True)
class _Duplicate:
    path: tuple[str, ...]
    first: int
    again: int
    values: tuple[Any, Any]          # the two scalar values (None where a value is not a scalar)


def _duplicates(node: yaml.Node, path: tuple[str, ...], seen_nodes: set | None = None) -> list[_Duplicate]:
    """Every key written twice in one mapping, with its full key path (merge keys may be overridden)."""
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:           # an aliased node: walked once
        return []
    seen_nodes.add(id(node))
    out: list[_Duplicate] = []
    if isinstance(node, yaml.MappingNode):
        first: dict[str, tuple[int, yaml.Node]] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = str(key_node.value)
            if key in first:
                line, before = first[key]
                out.append(_Duplicate((*path, key), line, key_node.start_mark.line + 1,
                                      tuple(getattr(v, "value", None) if isinstance(v, yaml.ScalarNode) else None
                                            for v in (before, value_node))))
            first[key] = (key_node.start_mark.line + 1, value_node)
            out += _duplicates(value_node, (*path, key), seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out += _duplicates(item, (*path, f"[{i}]"), seen_nodes)
    return out


def _json_object(text: Any) -> dict | None:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def duplicate_problem(label: str, dup: _Duplicate) -> Problem:
    """A key written twice: where, what YAML keeps, and the fix (for a JSON object written twice: the merge)."""
    dotted = ".".join(dup.path)
    objects = [_json_object(v) for v in dup.values]
    message = (f"duplicate key (lines {dup.first} and {dup.again}): YAML, and srtctl with it, keeps only the last "
               "value, so the first is silently lost")
    if all(o is not None for o in objects):
        merged = {**objects[0], **objects[1]}
        clash = sorted(k for k in objects[0] if k in objects[1] and objects[0][k] != objects[1][k])
        fix = (f"merge the two into one entry: {dup.path[-1]}: '{json.dumps(merged, separators=(',', ':'))}'"
               + (f" (the second wins on {', '.join(clash)}; check that is meant)" if clash else ""))
    elif dup.values[0] is not None and dup.values[1] is not None:
        fix = f"keep one of the two entries ({dup.values[1]!r} was judged, as it would run)"
    else:
        fix = "write the key once, with everything both entries say"
    return Problem(label, dotted, message, fix, line=dup.again)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    """The last of a key written twice wins, as in YAML (rackbench.core.yamlio._duplicates reports it); keys a
    merge key (``<<: *defaults``) brought in may be overridden."""
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
        seen[key] = key_node.start_mark.line + 1
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


class _BadKey(Exception):
    def __init__(self, line: int):
        self.line = line


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse(text: str, label: str) -> Any:
    """Parse YAML text strictly; ``label`` names the source in errors. ConfigError with every problem."""
    data, problems = parse_lenient(text, label)
    if problems:
        raise ConfigError(problems)
    return data


def parse_lenient(text: str, label: str) -> tuple[Any, list[Problem]]:
    """The document as it would run (the last of a duplicated key wins) and every duplicate key as a problem, so
    what parsed can still be judged; ConfigError for what does not parse at all. Parsing is pure, so the same text
    is parsed once (a catalog is loaded again and again by its tests and commands): each caller gets its own copy."""
    clean = _clean(text)
    if clean is not None:
        return _copy(clean[0]), []
    return _parsed(text, label)


def _copy(data: Any) -> Any:
    """A caller's own copy of a parsed document: its mappings and lists new, its scalars (immutable) shared."""
    if isinstance(data, _Lines):
        out = _Lines((k, _copy(v)) for k, v in data.items())
        out.lines = data.lines
        return out
    if isinstance(data, dict):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy(v) for v in data]
    return data


@functools.lru_cache(maxsize=512)
def _clean(text: str) -> tuple[Any] | None:
    """The document of a text that parses without a problem (whatever file it came from), else None."""
    try:
        data, problems = _parsed(text, "")
    except ConfigError:
        return None
    return None if problems else (data,)


def _parsed(text: str, label: str) -> tuple[Any, list[Problem]]:
    loader = _StrictLoader(text)
    try:
        data = loader.get_single_data()
        return data, [duplicate_problem(label, d) for d in getattr(loader, "duplicates", [])]
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
    finally:
        loader.dispose()


def load(path: Path | str) -> Any:
    """A YAML file, strictly (ConfigError with every problem)."""
    data, problems = load_lenient(path)
    if problems:
        raise ConfigError(problems)
    return data


def load_lenient(path: Path | str) -> tuple[Any, list[Problem]]:
    """A YAML file as it would run, and its duplicate keys as problems (rackbench.core.yamlio.parse_lenient)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(Problem(str(path), "", f"not UTF-8 ({err.reason} at byte {err.start})",
                                  "save the file as UTF-8")) from None
    except OSError as err:
        raise ConfigError(Problem(str(path), "", f"cannot read it ({err.strerror or err})",
                                  "make it a readable file")) from None
    return parse_lenient(text, str(path))


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
