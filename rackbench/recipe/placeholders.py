"""Placeholders in recipe values: which rackbench fills per node (``profile.templates``), and which nothing
expands (a literal ``${VAR}`` or ``{name}`` would reach the process verbatim)."""

from __future__ import annotations

import re

# What the suite fills in templated values (the keys profile.templates lists); anything else in braces or after $ is
# a literal placeholder that nothing would expand. {node_id} is srtctl's name for the node rank.
SUITE_PLACEHOLDERS = frozenset({"job_id", "node", "node_rank", "node_id", "head_node", "result_dir"})
# What srtctl itself fills in worker environment values (srt-slurm's worker launch: str.format_map, unknown names
# left as written).
SRTCTL_FILLS = frozenset({"node", "node_id"})
PLACEHOLDER_RE = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\}")


def placeholders(value: str) -> list[str]:
    return PLACEHOLDER_RE.findall(value)


def who_expands(found: list[str]) -> str:
    """Why the placeholders found in a value would reach the process as written (one sentence)."""
    shell = [ph for ph in found if ph.startswith("$")]
    srtctl = [ph for ph in found if ph.strip("{}") in SRTCTL_FILLS]
    ours = [ph for ph in found if ph.strip("{}") in SUITE_PLACEHOLDERS and ph not in srtctl]
    other = [ph for ph in found if ph not in shell + srtctl + ours]
    reasons = [(shell, "no shell reads this value (rackbench passes it as it is written, and srtctl quotes it), so "
                       "the process sees it verbatim"),
               (srtctl, "srtctl fills it in worker environments; rackbench fills it only in the keys "
                        "profile.templates lists"),
               (ours, "rackbench fills it only in the keys profile.templates lists"),
               (other, "neither srtctl nor rackbench fills it")]
    given = [(names, why) for names, why in reasons if names]
    if len(given) == 1:
        return given[0][1]
    return "; ".join(f"{', '.join(names)}: {why}" for names, why in given)
