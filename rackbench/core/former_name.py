"""What is left of the suite's former name, ``servebench`` (renamed because an unrelated project holds that name on
the package index): environment variables of the old prefix, which nothing reads any more, and the spelling a recipe
fingerprint and a trace's default marker keep, so that the rename changed no fingerprint and no seed's sessions.
Results, baselines and histories written under the former name are read as they are (tests/test_former_name.py)."""

from __future__ import annotations

from collections.abc import Mapping

FORMER = "servebench"          # the former name
OLD_PREFIX = FORMER.upper() + "_"
PREFIX = "RACKBENCH_"
NAME = "rackbench"


def stale_environment(env: Mapping[str, str]) -> list[str]:
    """One line per variable of the former prefix set in ``env``, naming what is read in its place."""
    return [f"{key} is set but no longer read: set {PREFIX}{key.removeprefix(OLD_PREFIX)} (the suite's former name "
            f"was {FORMER})" for key in sorted(env) if key.startswith(OLD_PREFIX)]


def as_named_before(text: str) -> str:
    """``text`` with the suite's name spelled as before the rename: what a recipe fingerprint hashes, so that a
    profile whose paths, model ids or variables changed only by the rename keeps its fingerprint, and the history
    pools its runs from both sides of it."""
    return text.replace(NAME, FORMER).replace(NAME.upper(), FORMER.upper())
