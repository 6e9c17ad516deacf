"""The commands of ``servebench`` that run real components: the installed parsers (flags, flag-table) and the
cluster itself (preflight). Registered by :mod:`servebench.cli`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .catalog import Catalog
from .errors import ConfigError, Problem
from .profile import Profile


def _many(cat: Catalog, key: str) -> list[Profile]:
    found = cat.find(key)
    if not found:
        raise ConfigError(Problem(key, "", "no profile, case or recipe file by that name",
                                  "see `servebench matrix` for the ids"))
    return found


def cmd_flags(args) -> int:
    """Every server process's flags through the real parsers installed in the serving venv."""
    import subprocess
    import tempfile

    from .preflight import entrypoint
    from .server.placement import dry_placement
    from .server.plan import plan
    from .tools import FLAG_TABLE

    # The real parser is the judge here, so the pinned-table rule is not applied first.
    cat = Catalog.load(args.recipes, skip_rules={"entrypoint-flags"})
    profiles = [p for t in args.targets for p in _many(cat, t)] if args.targets else cat.profiles
    python = Path(args.python)
    if not python.exists():
        print(f"{python} not found: run scripts/install-servers (or pass --python)", file=sys.stderr)
        return 2
    requests = []
    for prof in profiles:
        for proc in plan(prof, dry_placement(prof)).processes:
            found = entrypoint(proc)
            if found:                                     # etcd, nats and setup steps have no parser
                requests.append({"id": f"{prof.id} {proc.name}", "entrypoint": found[0], "args": found[1]})
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(requests, fh)
        fh.flush()
        done = subprocess.run([str(python), str(FLAG_TABLE), "--parse", fh.name], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return 2
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    entry = {r["id"]: r["entrypoint"] for r in requests}
    for a in answers:
        print(f"{a['id']:45} {entry[a['id']]:16} " + ("ok" if a["ok"] else f"REJECTED: {a['error']}"))
    return 0 if all(a["ok"] for a in answers) else 1


def cmd_preflight(args) -> int:
    """Allocate each profile's nodes, run its setup steps and etcd/NATS, check every node, release."""
    from . import preflight

    cat = Catalog.load(args.recipes)
    profiles = [p for t in args.targets for p in _many(cat, t)]
    if args.on:
        if args.on not in cat.clusters:
            raise SystemExit(f"servebench: no cluster {args.on!r} (known: {', '.join(sorted(cat.clusters))})")
        profiles = [preflight.retarget(p, cat.clusters[args.on]) for p in profiles]
    failed = 0
    for prof in profiles:
        report = preflight.allocate_and_check(prof, Path(args.results_dir), Path.cwd())
        print("\n".join(report.lines()), flush=True)
        failed += not report.ok
    return 1 if failed else 0


def cmd_flag_table(args) -> int:
    """Write the flag table of the vLLM / Dynamo installed for ``--python`` (the real parsers, no engine)."""
    import subprocess

    from .tools import FLAG_TABLE

    argv = [args.python, str(FLAG_TABLE), "--out", args.out] + (["--name", args.name] if args.name else [])
    return subprocess.run(argv).returncode
