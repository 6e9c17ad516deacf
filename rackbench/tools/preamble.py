#!/usr/bin/env python3
"""Run a process's launch preamble inside its own step, then become the process (``os.execvp``).

    python3 preamble.py STEPS_JSON -- ARGV...

STEPS_JSON is a JSON list of steps, each ``{"name", "argv"?, "env"?, "unless_missing"?, "mkdir"?}``:

* ``argv``: the command (an argument list: nothing here reads it as shell text); a step without one only makes its
  folders;
* ``unless_missing``: a path; when it does not exist here, the step is not run and a line says so (a setup script
  that reads the model directory, on a node where the model is not staged);
* ``mkdir``: folders to create first.

A step that fails stops everything with its exit code and one line naming it; the process then never starts. Once
every step has run, one line says the process starts (a point's clock starts there, not with its setup).
rackbench runs the recipe's setup script and the Dynamo install this way, in the container of the process that
needs what they make, and the load generator's own preparation (its install, the tokenizer cache) in the client's step (with pyxis, an unnamed container and everything written in it vanish when its step ends).
Stand-alone on purpose: it runs with the container's interpreter, where rackbench is not installed.
"""

import json
import os
import subprocess
import sys

STARTING = "preamble done, starting "     # rackbench.server.containers.preamble_done reads it


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: preamble.py STEPS_JSON -- ARGV...")
    steps, argv = json.loads(sys.argv[1]), sys.argv[3:]
    for step in steps:
        name = step["name"]
        missing = step.get("unless_missing")
        if missing and not os.path.exists(missing):
            print(f"rackbench: {name} not run: {missing} does not exist on this node", flush=True)
            continue
        for folder in step.get("mkdir", []):
            os.makedirs(folder, exist_ok=True)
        if not step.get("argv"):
            continue
        print(f"rackbench: {name}: {' '.join(step['argv'])}", flush=True)
        code = subprocess.call(step["argv"], env={**os.environ, **step.get("env", {})})
        if code != 0:
            print(f"rackbench: {name} failed with exit code {code}; {argv[0]} was not started", flush=True)
            sys.exit(code)
    print(f"rackbench: {STARTING}{argv[0]}", flush=True)     # the caller's clock for the process starts here
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
