"""The names that become parts of paths, and how a run's id is made (rackbench.core.results_folder lays the paths
out with them; the result model's ids carry the same pattern)."""

from __future__ import annotations

import os
import re
import time

# What a name inside a path may be: letters, digits, '.', '_', '+', '-'; not starting with '.', never '..'; at most
# NAME_MAX characters. (No look-around: the result model's JSON Schema carries the same pattern.)
SAFE_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_+-]*(\.[A-Za-z0-9_+-]+)*$"
NAME_MAX = 200


def new_run_id() -> str:
    """UTC time to the second, the process and a random part: two sessions started together never share one."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + f"{os.getpid()}-{os.urandom(2).hex()}"


def name(value: str, what: str = "name") -> str:
    """``value`` if it is a safe name for a path component (:data:`SAFE_NAME`); ValueError (one line) if not."""
    if not isinstance(value, str) or len(value) > NAME_MAX or not re.match(SAFE_NAME, value):
        raise ValueError(f"{what} {value!r} cannot name a file or folder (letters, digits, '.', '_', '+' and '-' "
                         f"only, no '..', at most {NAME_MAX}): a results file rackbench did not write?")
    return value
