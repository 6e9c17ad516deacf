#!/usr/bin/env python3
"""Build the recipe's pinned Dynamo once into a wheelhouse on shared storage, then install it from there.

    python3 dynamo_env.py WHEELHOUSE REQUIREMENT...               # a step's preamble: make it if missing, install
    python3 dynamo_env.py --make-only WHEELHOUSE REQUIREMENT...   # `rackbench stage --dynamo`: make it only

WHEELHOUSE is a folder of the shared cache named after the requirements and the image. The first step that finds
it missing, under a lock every user can take, builds a wheel of each requirement (``pip wheel --no-deps``: for a
source commit, ``ai-dynamo-runtime`` from ``lib/bindings/python`` at that commit, so the runtime is the commit's,
not whatever release the package index has) and then the wheels of what they need, and renames the folder into
place; every later step, allocation and user finds it made. That build is the only part that needs the package
index, GitHub, git and, for a source commit, a Rust toolchain. Each step then installs from the wheelhouse alone
(``--no-index``: no network), into its own container (``--container-writable``), past an image's PEP 668 marker
(``PIP_BREAK_SYSTEM_PACKAGES``, which an older pip ignores).

Stand-alone on purpose: it runs with the container's interpreter, where rackbench is not installed.
"""

import json
import os
import subprocess
import sys

from made_once import made_once           # beside this file (a script's folder is on sys.path)

TOP = "requirements.json"                 # the wheels of the requirements themselves, in the order given
PIP = [sys.executable, "-m", "pip"]
QUIET = ["--no-input", "--disable-pip-version-check"]


def make(wheelhouse: str, requirements: list[str]) -> str:
    def build(folder: str) -> None:
        top = os.path.join(folder, ".top")
        if subprocess.call([*PIP, "wheel", *QUIET, "--no-deps", "--wheel-dir", top, *requirements]) != 0:
            sys.exit(f"dynamo_env: building {' '.join(requirements)} failed: this needs the package index, and for "
                     "a source commit GitHub, git and a Rust toolchain (cargo) where it runs (its log above)")
        wheels = sorted(os.listdir(top))
        if subprocess.call([*PIP, "wheel", *QUIET, "--wheel-dir", folder, "--find-links", top,
                            *(os.path.join(top, w) for w in wheels)]) != 0:
            sys.exit(f"dynamo_env: collecting what {', '.join(wheels)} need failed (its log above)")
        with open(os.path.join(folder, TOP), "w") as fh:
            json.dump(wheels, fh)
        for wheel in wheels:
            os.unlink(os.path.join(top, wheel))
        os.rmdir(top)
    return made_once(wheelhouse, build, "dynamo_env",
                     "build it for this image: rackbench stage PROFILE --dynamo")


def install(wheelhouse: str) -> int:
    with open(os.path.join(wheelhouse, TOP)) as fh:
        wheels = [os.path.join(wheelhouse, w) for w in json.load(fh)]
    print(f"dynamo_env: installing {', '.join(os.path.basename(w) for w in wheels)} from {wheelhouse}", flush=True)
    return subprocess.call([*PIP, "install", *QUIET, "--no-index", "--find-links", wheelhouse, *wheels],
                           env={**os.environ, "PIP_BREAK_SYSTEM_PACKAGES": "1"})


def main() -> None:
    args = sys.argv[1:]
    only = args[:1] == ["--make-only"]
    args = args[1:] if only else args
    if len(args) < 2:
        sys.exit("usage: dynamo_env.py [--make-only] WHEELHOUSE REQUIREMENT...")
    print("dynamo_env: " + make(args[0], args[1:]), flush=True)
    if not only:
        code = install(args[0])
        if code != 0:
            sys.exit(f"dynamo_env: pip install from {args[0]} failed with exit code {code}")


if __name__ == "__main__":
    main()
