#!/usr/bin/env python3
"""Check `aiperf profile` argument lists with AIPerf's own parser and plan builder, without running anything.

Run it with AIPerf's interpreter:  .venvs/aiperf/bin/python rackbench/tools/aiperf_check.py REQUESTS.json
REQUESTS is [{"id", "args"}] (args after `aiperf profile`); the answer (stdout, JSON) is [{"id", "ok", "error"}].
"""

import contextlib
import io
import json
import sys


def check(args: list[str]) -> str | None:
    from aiperf.cli_commands.profile import app
    from aiperf.config.flags.resolver import resolve_config
    from aiperf.config.loader import build_benchmark_plan

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            _, bound, _ = app.parse_args(args, exit_on_error=False, print_error=False)
            build_benchmark_plan(resolve_config(bound.arguments["cli_config"]))
    except Exception as exc:  # noqa: BLE001 - AIPerf's own validation errors, whatever their class
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def main() -> None:
    with open(sys.argv[1]) as fh:
        requests = json.load(fh)
    print(json.dumps([{"id": r["id"], "ok": (e := check(r["args"])) is None, "error": e} for r in requests]))


if __name__ == "__main__":
    main()
