"""perf-changelog.yaml: the append-only record of what each PR changed in the sweep.

An entry::

    - config-keys:
        - kimi-k3-gb200-*          # profile ids or globs over them
      description:
        - what changed and why
      pr-link: https://github.com/OWNER/REPO/pull/123

File rules: UTF-8, no CR/tab/NUL, ends with one newline, duplicate keys rejected, exactly one blank
line between entries and none at the end, and history is byte-identical to the base ref (appends only).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path
from typing import Iterable

from rackbench.core import yamlio
from rackbench.core.errors import ConfigError, Problem

ENTRY_KEYS = {"config-keys", "description", "pr-link"}
ENTRY_START = "- config-keys:"
PR_LINK = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/pull/(\d+|XXX)$")


def check(data: bytes, name: str, profile_ids: Iterable[str], base: bytes | None = None) -> list[Problem]:
    """Every problem of a changelog's bytes; ``base`` is the file at the base ref (None: no history check)."""
    ids = sorted(profile_ids)
    problems: list[Problem] = []

    def add(key: str, message: str, fix: str, line: int | None = None) -> None:
        problems.append(Problem(name, key, message, fix, line))

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        add("", f"not UTF-8 (byte {err.start})", "save the file as UTF-8")
        return problems
    if base is not None:
        problems += _history(data, base, name)
    for ch, label in (("\r", "carriage return"), ("\t", "tab"), ("\0", "NUL")):
        if ch in text:
            line = text[: text.index(ch)].count("\n") + 1
            add("", f"contains a {label}", f"remove it (first on line {line})", line)
    if text and not text.endswith("\n"):
        add("", "does not end with a newline", "add a final newline")
    if text.endswith("\n\n"):
        add("", "ends with a blank line", "remove trailing blank lines")
    lines = text.split("\n")
    starts = [i for i, ln in enumerate(lines) if ln.startswith(ENTRY_START)]
    for n, i in enumerate(starts):
        if n == 0:
            continue
        if lines[i - 1].strip() or (i >= 2 and not lines[i - 2].strip()):
            add(f"[{n}]", "entries must be separated by exactly one blank line", "leave one empty line before "
                "'- config-keys:'", i + 1)
    body_start = starts[0] if starts else len(lines)
    for i, ln in enumerate(lines[body_start:], start=body_start):
        if not ln.strip() and i + 1 < len(lines) and lines[i + 1] and not lines[i + 1].startswith(ENTRY_START):
            add("", "blank line inside an entry", "remove it", i + 1)
    try:
        doc = yamlio.parse(text, name)
    except ConfigError as err:
        return problems + err.problems
    if doc is None:
        doc = []
    if not isinstance(doc, list):
        add("", "must be a list of entries", "start each entry with '- config-keys:'")
        return problems
    if len(doc) != len(starts):
        add("", f"{len(doc)} entries parsed but {len(starts)} lines start with '{ENTRY_START}'",
            "begin every entry with '- config-keys:' at column 0")
    for n, entry in enumerate(doc):
        line = starts[n] + 1 if n < len(starts) else None
        if not isinstance(entry, dict):
            add(f"[{n}]", "entry must be a mapping", "see the entry format at the top of the file", line)
            continue
        for key in sorted(set(entry) - ENTRY_KEYS):
            add(f"[{n}].{key}", "unknown key", f"use only {', '.join(sorted(ENTRY_KEYS))}",
                yamlio.line_of(entry, key))
        for key in sorted(ENTRY_KEYS - set(entry)):
            add(f"[{n}].{key}", "required key is missing", "add it", line)
        for key in ("config-keys", "description"):
            value = entry.get(key)
            if key in entry and (not isinstance(value, list) or not value
                                 or not all(isinstance(v, str) and v.strip() for v in value)):
                add(f"[{n}].{key}", "must be a non-empty list of strings", "list one item per line",
                    yamlio.line_of(entry, key))
        for i, pattern in enumerate(entry.get("config-keys") or []):
            if isinstance(pattern, str) and not fnmatch.filter(ids, pattern):
                add(f"[{n}].config-keys[{i}]", f"{pattern!r} matches no profile",
                    f"use a profile id or glob, e.g. one of {ids}", yamlio.line_of(entry, "config-keys"))
        link = entry.get("pr-link")
        if "pr-link" in entry and not (isinstance(link, str) and PR_LINK.match(link)):
            add(f"[{n}].pr-link", f"{link!r} is not a pull request link",
                "use https://github.com/OWNER/REPO/pull/N (or /pull/XXX until it has a number)",
                yamlio.line_of(entry, "pr-link"))
    return problems


def _history(head: bytes, base: bytes, name: str) -> list[Problem]:
    if head.startswith(base):
        added = head[len(base):]
        if base and added and not added.startswith(b"\n" + ENTRY_START.encode()):
            return [Problem(name, "", "appended text must start with one blank line and '- config-keys:'",
                            "append whole entries after one empty line", base.count(b"\n") + 1)]
        return []
    head_lines, base_lines = head.split(b"\n"), base.split(b"\n")
    line = next((i + 1 for i, (a, b) in enumerate(zip(head_lines, base_lines)) if a != b),
                min(len(head_lines), len(base_lines)))
    return [Problem(name, "", "history changed: the changelog is append-only and must keep every byte of the "
                    "base ref", "restore the earlier entries and append your change at the end", line)]


def git_show(ref: str, path: Path) -> bytes | None:
    """The file at ``ref`` (None when it did not exist there)."""
    found = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path.parent, capture_output=True, text=True)
    if found.returncode != 0:
        raise ConfigError(Problem(str(path), "", f"--base {ref}: {path.parent} is not in a git work tree "
                                  f"({found.stderr.strip() or 'git rev-parse failed'})",
                                  "run from a clone of the repository, or drop --base"))
    top = found.stdout.strip()
    rel = path.resolve().relative_to(Path(top).resolve())
    proc = subprocess.run(["git", "show", f"{ref}:{rel.as_posix()}"], cwd=top, capture_output=True)
    if proc.returncode != 0:
        known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=top,
                               capture_output=True)
        if known.returncode != 0:
            raise ConfigError(Problem(str(path), "", f"unknown git ref {ref!r}", "pass a commit, branch or tag"))
        return None
    return proc.stdout


def affected(entries: list, profile_id: str) -> list[int]:
    """Indexes of the changelog entries whose config-keys select this profile (ids or globs over them)."""
    out = []
    for i, entry in enumerate(entries or []):
        keys = entry.get("config-keys") if isinstance(entry, dict) else None
        if isinstance(keys, list) and any(isinstance(k, str) and fnmatch.fnmatchcase(profile_id, k) for k in keys):
            out.append(i)
    return out


def effects(entries: list, verdicts: dict[str, str], profiles: dict[str, str]) -> list[dict]:
    """Per changelog entry that selects compared points: its index, PR link, description, and the verdicts of the
    points it selects (``verdicts``: case -> verdict of output tok/s per GPU; ``profiles``: case -> profile id)."""
    groups: dict[int, list[str]] = {}
    for case in sorted(verdicts):
        for i in affected(entries, profiles[case]):
            groups.setdefault(i, []).append(case)
    out = []
    for i, cases in sorted(groups.items()):
        entry = entries[i]
        counts = {v: n for v in ("better", "worse", "within noise", "too short", "no records")
                  if (n := sum(verdicts[c] == v for c in cases))}
        out.append({"entry": i + 1, "pr": entry.get("pr-link") or "no pr-link",
                    "description": " ".join(str(d) for d in entry.get("description") or []) if isinstance(
                        entry.get("description"), list) else str(entry.get("description") or ""),
                    "cases": cases, "counts": counts})
    return out


def load_entries(path: Path | str) -> list:
    """The changelog's entries, or [] when the file is absent or broken (`rackbench changelog check` says why)."""
    if not Path(path).is_file():
        return []
    try:
        entries = yamlio.load(path)
    except ConfigError:
        return []
    return entries if isinstance(entries, list) else []
