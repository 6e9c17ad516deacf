#!/usr/bin/env python3
"""Import a container image once, to the squashfs file every step of a cluster runs (slurm.images).

    python3 image_import.py FILE NAME

On a node with enroot (`rackbench stage --images` runs it in a one-node srun step): under a lock beside FILE, a
FILE already there is left alone; otherwise ``enroot import`` writes a file of its own beside it, renamed into place,
so two users (or two profiles) importing at once make one file and no step ever reads a half-written one. This is
what the seed does before its job; with the file named in slurm.images no step pulls and imports the image again.

Stand-alone on purpose: it runs with the node's own python3, where rackbench is not installed.
"""

import fcntl
import os
import shutil
import socket
import subprocess
import sys

from shared_lock import shared_lock       # beside this file (a script's folder is on sys.path)

NODE = os.environ.get("SLURMD_NODENAME") or socket.gethostname()     # the Slurm node's name where it has one


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: image_import.py FILE NAME")
    target, name = sys.argv[1], sys.argv[2]
    parent = os.path.dirname(target) or "."
    if not os.path.isdir(parent):
        sys.exit(f"image_import: {parent} does not exist on {NODE}: make it on the shared storage "
                 "every node reads, or map the image to a file there (slurm.images)")
    # a lock every user of the shared storage can take: flock needs only a read open, and the file is made 0666
    with os.fdopen(shared_lock(target + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(target):
            print(f"image_import: {name}: imported already ({target})", flush=True)
            return
        if shutil.which("enroot") is None:
            sys.exit(f"image_import: enroot is not on {NODE}'s PATH: run it where pyxis runs the steps "
                     "(a compute node of the cluster)")
        tmp = f"{target}.{os.getpid()}.tmp"
        try:
            code = subprocess.call(["enroot", "import", "--output", tmp, f"docker://{name}"])
            if code != 0:
                sys.exit(f"image_import: enroot import of {name} failed with exit code {code}")
            os.rename(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    print(f"image_import: {name}: imported to {target}", flush=True)


if __name__ == "__main__":
    main()
