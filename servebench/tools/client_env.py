#!/usr/bin/env python3
"""Make the load generator's environment once, on shared storage, with the client's own interpreter.

    python3 client_env.py TARGET CONSTRAINTS REQUIREMENT...

TARGET is a folder of the shared cache named after what goes into it (the requirements, the constraints file's
text, the client's image): the first client step that finds it missing runs ``pip install --target`` into a folder
of its own beside it, every version held by CONSTRAINTS (pip's constraints file: the versions servebench's tests
ran with), and renames it into place under a lock; every later step, point, job and user finds it made and
installs nothing. The generator then runs with TARGET first on PYTHONPATH, ahead of the image's own packages,
which it never changes (an image's pip refuses system installs since PEP 668; a per-point install also took
minutes and resolved ~50 dependencies afresh each time).

Stand-alone on purpose: it runs with the container's interpreter, where servebench is not installed.
"""

import fcntl
import os
import platform
import shutil
import subprocess
import sys
import tempfile

from shared_lock import shared_lock       # beside this file (a script's folder is on sys.path)

MARK = ".servebench-env"


def made_for() -> str:
    """What the environment was made with: packages built for another interpreter or machine do not load."""
    return f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]} {platform.machine()}"


def make(target: str, constraints: str, requirements: list[str]) -> str:
    mark = os.path.join(target, MARK)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with os.fdopen(shared_lock(target + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one maker; the others wait and find it made
        if os.path.isfile(mark):
            with open(mark) as fh:
                had = fh.read().strip()
            if had != made_for():
                sys.exit(f"client_env: {target} was made for {had}, this client runs {made_for()}: remove it, or "
                         "name the client's image in runtime.client.image so each image gets its own")
            return f"made already: {target}"
        tmp = tempfile.mkdtemp(dir=os.path.dirname(target), prefix=os.path.basename(target) + ".", suffix=".tmp")
        try:
            code = subprocess.call([sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                                    "--target", tmp, "--constraint", constraints, *requirements])
            if code != 0:
                sys.exit(f"client_env: pip install {' '.join(requirements)} failed with exit code {code}")
            with open(os.path.join(tmp, MARK), "w") as fh:
                fh.write(made_for() + "\n")
            os.chmod(tmp, 0o755)                  # readable by the cache's other users (mkdtemp's is private)
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return f"made: {target}"


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit("usage: client_env.py TARGET CONSTRAINTS REQUIREMENT...")
    print("client_env: " + make(sys.argv[1], sys.argv[2], sys.argv[3:]), flush=True)


if __name__ == "__main__":
    main()
