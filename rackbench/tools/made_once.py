"""Make a folder of shared storage once, whoever asks first: the others wait and find it made.

Under a lock beside the target that any user can take (:mod:`shared_lock`), a target that has its mark is left
alone; otherwise the maker builds into a folder of its own beside it and renames that into place, so no reader ever
sees a half-made one and two makers at once make one. The mark says what the contents were made for (interpreter
and machine): packages built for another do not load.

Stand-alone, beside the tools that import it: they run with another interpreter, with this folder on sys.path.
"""

import fcntl
import os
import platform
import shutil
import sys
import tempfile

from shared_lock import shared_lock

MARK = ".rackbench-env"


def made_for() -> str:
    """What the contents are made with: packages built for another interpreter or machine do not load."""
    return f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]} {platform.machine()}"


def made_once(target: str, build, tool: str, other_fix: str) -> str:
    """``build(folder)`` makes the contents into a fresh folder, once for ``target``; it exits (SystemExit) on
    failure, and then nothing is left behind. ``other_fix``: what to do when the target was made for another
    interpreter or machine."""
    mark = os.path.join(target, MARK)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with os.fdopen(shared_lock(target + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one maker; the others wait and find it made
        if os.path.isfile(mark):
            with open(mark) as fh:
                had = fh.read().strip()
            if had != made_for():
                sys.exit(f"{tool}: {target} was made for {had}, this step runs {made_for()}: remove it, or "
                         f"{other_fix}")
            return f"made already: {target}"
        tmp = tempfile.mkdtemp(dir=os.path.dirname(target), prefix=os.path.basename(target) + ".", suffix=".tmp")
        try:
            build(tmp)
            with open(os.path.join(tmp, MARK), "w") as fh:
                fh.write(made_for() + "\n")
            os.chmod(tmp, 0o755)                  # readable by the cache's other users (mkdtemp's is private)
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return f"made: {target}"
