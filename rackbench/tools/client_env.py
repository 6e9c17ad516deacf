#!/usr/bin/env python3
"""Make the load generator's environment once, on shared storage, with the client's own interpreter.

    python3 client_env.py TARGET CONSTRAINTS REQUIREMENT...

TARGET is a folder of the shared cache named after what goes into it (the requirements, the constraints file's
text, the client's image): the first client step that finds it missing runs ``pip install --target`` into a folder
of its own beside it, every version held by CONSTRAINTS (pip's constraints file: the versions rackbench's tests
ran with), and renames it into place under a lock; every later step, point, job and user finds it made and
installs nothing. The generator then runs with TARGET first on PYTHONPATH, ahead of the image's own packages,
which it never changes (an image's pip refuses system installs since PEP 668; a per-point install also took
minutes and resolved ~50 dependencies afresh each time).

Stand-alone on purpose: it runs with the container's interpreter, where rackbench is not installed.
"""

import subprocess
import sys

from made_once import made_once           # beside this file (a script's folder is on sys.path)


def make(target: str, constraints: str, requirements: list[str]) -> str:
    def build(folder: str) -> None:
        code = subprocess.call([sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                                "--target", folder, "--constraint", constraints, *requirements])
        if code != 0:
            sys.exit(f"client_env: pip install {' '.join(requirements)} failed with exit code {code}")
    return made_once(target, build, "client_env",
                     "name the client's image in runtime.client.image so each image gets its own")


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit("usage: client_env.py TARGET CONSTRAINTS REQUIREMENT...")
    print("client_env: " + make(sys.argv[1], sys.argv[2], sys.argv[3:]), flush=True)


if __name__ == "__main__":
    main()
