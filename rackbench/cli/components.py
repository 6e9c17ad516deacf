"""Commands that run real components: the installed parsers (flags, flag-table) and the cluster itself
(preflight)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rackbench.cli.base import PROFILES, RESULTS_DIR, Command
from rackbench.cli.recipes import catalog, many
from rackbench.core.names import new_run_id
from rackbench.core.results_folder import ResultsFolder
from rackbench.tools import FLAG_TABLE

SERVE_PYTHON = ".venvs/serve/bin/python"


class FlagsCommand(Command):
    name = "flags"
    help = "parse every server process's flags with the real parsers of the serving venv"
    options = (PROFILES,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--python", default=SERVE_PYTHON, help="interpreter with vLLM/Dynamo installed")

    def run(self, args) -> int:
        from rackbench.server.assembly import Assembly
        from rackbench.server.preflight import entrypoint

        # The real parser is the judge here, so the pinned-table rule is not applied first.
        profiles = many(catalog(args, skip_rules={"entrypoint-flags"}), args.targets)
        python = Path(args.python)
        if not python.exists():
            print(f"{python} not found: run scripts/install-servers (or pass --python)", file=sys.stderr)
            return 2
        requests = []
        for prof in profiles:
            _, _, sp = Assembly(prof, ResultsFolder.at("results"), "RUN", dry=True).render()
            for proc in sp.processes:
                found = entrypoint(proc, sp.frontend)
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


class PreflightCommand(Command):
    name = "preflight"
    help = "allocate, start etcd/NATS, check every node and the load generator's client where it runs; no server"
    options = (RESULTS_DIR,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("targets", nargs="+", help="profiles")
        parser.add_argument("--on", metavar="CLUSTER", help="run on another cluster of the same shape (e.g. "
                                                            "gb200-local)")

    def run(self, args) -> int:
        from rackbench.load.preflight import check_steps
        from rackbench.server import preflight
        cat = catalog(args)
        profiles = many(cat, args.targets)
        if args.on:
            if args.on not in cat.clusters:
                raise SystemExit(f"rackbench: no cluster {args.on!r} (known: {', '.join(sorted(cat.clusters))})")
            profiles = [preflight.retarget(p, cat.clusters[args.on]) for p in profiles]
        failed = 0
        # a run folder of its own: never the last session's (whose points, logs and manifest it would mix with)
        results = ResultsFolder.for_run(ResultsFolder.at(Path(args.results_dir).absolute()).shared,
                                        f"preflight-{new_run_id()}")
        for prof in profiles:
            report = preflight.allocate_and_check(prof, results, Path.cwd(), extra=check_steps(prof, results))
            print("\n".join(report.lines()), flush=True)
            failed += not report.ok
        return 1 if failed else 0


class FlagTableCommand(Command):
    name = "flag-table"
    help = "write the flag table of an interpreter's vLLM/Dynamo (real parsers)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--python", default=SERVE_PYTHON, help="interpreter with vLLM/Dynamo installed")
        parser.add_argument("--out", required=True, help="e.g. rackbench/data/flags/<name>.json")
        parser.add_argument("--name", help="table name (default: from the installed versions)")

    def run(self, args) -> int:
        argv = [args.python, str(FLAG_TABLE), "--out", args.out] + (["--name", args.name] if args.name else [])
        return subprocess.run(argv).returncode


def import_images(profiles) -> int:
    """Each image the profiles' steps run in (the recipe's, the infra's, the client's) imported once to the file
    slurm.images names, where it is missing: one one-node srun step each (rackbench/tools/image_import.py)."""
    from rackbench.cluster.srun import import_step
    wanted = {}
    for p in profiles:
        cl = p.cluster
        for name in (p.recipe.model.container, cl.runtime.infra.image, cl.runtime.client.image):
            if name and name in cl.slurm.images:
                wanted[cl.slurm.images[name]] = (name, p.recipe.slurm.partition or cl.slurm.partition,
                                                 p.recipe.slurm.account or cl.slurm.account)
    status = 0
    for file, (name, partition, account) in sorted(wanted.items()):
        if Path(file).is_file():
            print(f"rackbench stage: {name}: imported already ({file})")
            continue
        done = subprocess.run(import_step(partition, account, file, name), stdin=subprocess.DEVNULL)
        status = status or (1 if done.returncode else 0)
    return status


def drafts(profiles) -> dict[str, str]:
    """Each draft model the profiles' servers read -> the folder the cluster file names for it (shared storage the
    containers mount)."""
    from rackbench.cluster.request import draft_dir
    return dict(found for p in profiles if (found := draft_dir(p)))


def build_dynamo(profiles, results: ResultsFolder) -> int:
    """Each profile's pinned Dynamo built once into its wheelhouse (rackbench/tools/dynamo_env.py --make-only), in
    a one-node srun job in the recipe's image with the interpreter its steps install with, where the wheelhouse is
    missing: the job's steps then install it from there, with no network and no compiler. The job mounts what this
    host sees of the profile's mounts (the tools, the shared cache, shared storage), not a node's own disks."""
    import dataclasses

    from rackbench.cluster.srun import one_node_job
    from rackbench.server import frontends
    from rackbench.server.assembly import Assembly
    from rackbench.server.frontends.dynamo import DynamoFrontend, dynamo_env_argv, wheelhouse
    status, done = 0, set()
    for p in profiles:
        assembly = Assembly(p, results, "stage", dry=True, root=Path.cwd())
        req = assembly.request()
        where = assembly.placement(assembly.allocate(req))
        front = frontends.of(p.recipe.frontend.type)
        if not (isinstance(front, DynamoFrontend) and front.install(p, where)):
            print(f"rackbench stage: {p.id}: no Dynamo to build (dynamo.install or the cluster's "
                  "runtime.dynamo_install is off)")
            continue
        house = wheelhouse(p, where)
        if house in done or Path(house).is_dir():
            print(f"rackbench stage: {p.id}: Dynamo built already ({house})")
            continue
        done.add(house)
        Path(house).parent.mkdir(parents=True, exist_ok=True)
        seen = {src: dst for src, dst in req.container_mounts.items() if Path(src).exists()}
        seen[str(Path(house).parent)] = str(Path(house).parent)     # the wheelhouses, at their own path
        req = dataclasses.replace(req, container_mounts=seen)
        argv = dynamo_env_argv(p, where, make_only=True)
        partition, account = p.recipe.slurm.partition or p.cluster.slurm.partition, \
            p.recipe.slurm.account or p.cluster.slurm.account
        ran = subprocess.run(one_node_job("rackbench-dynamo-build", partition, account, argv, req),
                             stdin=subprocess.DEVNULL)
        status = status or (1 if ran.returncode else 0)
    return status


class StageCommand(Command):
    name = "stage"
    help = ("stage what the profiles' points read offline (public corpus, tokenizer) into the client's shared cache, "
            "and their draft model where the cluster file names it, once, from a machine that reaches the Hugging "
            "Face Hub")
    options = (RESULTS_DIR,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("targets", nargs="+", help="profiles")
        parser.add_argument("--cache", metavar="DIR", help="the cache as this host sees it (default: the cluster's "
                            "runtime.client.cache, else the results folder's .hf-cache)")
        parser.add_argument("--load-bin", metavar="PATH", help="the load generator here (default: its own)")
        parser.add_argument("--images", action="store_true", help="also import each image the profiles' steps run "
                            "in to the file slurm.images names, where missing (a one-node srun step with enroot)")
        parser.add_argument("--dynamo", action="store_true", help="also build each profile's pinned Dynamo once into "
                            "the shared cache's wheelhouse, where missing (a one-node srun step in the recipe's "
                            "image; a source commit needs GitHub, git and cargo there)")

    def run(self, args) -> int:
        import os

        from rackbench.load.generator import generator_for
        from rackbench.server.assembly import Assembly
        profiles = many(catalog(args), args.targets)
        status = import_images(profiles) if args.images else 0
        results = ResultsFolder.at(Path(args.results_dir).absolute())
        if args.dynamo:
            status = build_dynamo(profiles, results) or status
        caches = {args.cache or p.cluster.runtime.client.cache or str(results.hf_cache) for p in profiles}
        if len(caches) > 1:
            raise SystemExit(f"rackbench stage: these profiles keep their caches in {', '.join(sorted(caches))}: "
                             "stage one cluster's profiles at a time, or pass --cache")
        cache = Path(caches.pop())
        models = {}
        for p in profiles:
            seen = Assembly(p, results, "stage", dry=True).model_dir()
            if seen is not None and seen.is_dir():
                models[p.id] = seen
        for name in dict.fromkeys(p.spec.load.generator for p in profiles):
            mine = [p for p in profiles if p.spec.load.generator == name]
            gen = generator_for(name, args.load_bin)
            staged = gen.stage(mine, cache, models, drafts(mine))
            if staged is None:
                print(f"rackbench stage: nothing to stage for {', '.join(p.id for p in mine)} ({name})")
                continue
            argv, env = staged
            done = subprocess.run(argv, env={**os.environ, **env})
            if done.returncode == 3:
                print(f"rackbench stage: the Hub cannot be reached from this machine: run `rackbench stage` where "
                      f"it can, with --cache naming the cluster's shared cache as that machine sees it ({cache}), or "
                      "copy the staged folder there", file=sys.stderr)
            if done.returncode != 0:
                status = 1
        for p in profiles:
            if p.id not in models and p.spec.load.dataset != "generated":
                print(f"note: {p.id}: its model directory is not visible here; the client's step copies the "
                      "tokenizer into the cache on the head node before each point")
        return status


COMMANDS = (FlagsCommand, PreflightCommand, FlagTableCommand, StageCommand)
