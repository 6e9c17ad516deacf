"""``rackbench rehearse``: a profile's first run on a stand-in of its cluster (the local Slurm shaped like it, every
step in a pyxis container), twice: on bare nodes, as a fresh allocation's disks are, and with a stand-in of what the
launch reads before the weights staged where the cluster stages the model. It prints what a real first run would
meet at each stage."""

from __future__ import annotations

from pathlib import Path

from rackbench.cli.base import RESULTS_DIR, Command
from rackbench.cli.recipes import catalog, many
from rackbench.core.results_folder import ResultsFolder


class RehearseCommand(Command):
    name = "rehearse"
    help = "a profile's launch on a stand-in cluster, on bare nodes and with a stand-in model staged: what a first " \
           "run meets"
    options = (RESULTS_DIR,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("targets", nargs="+", help="profiles")
        parser.add_argument("--on", metavar="CLUSTER", default="gb200-local",
                            help="the stand-in cluster (slurm.node_local disks; default gb200-local)")
        parser.add_argument("--installs", choices=("own", "stand-in"), default="own",
                            help="own (default): what the profile's own cluster installs and runs from shared storage "
                            "(the Dynamo install, the client's environment, etcd/NATS binaries), as a first run "
                            "there does; stand-in: the stand-in's prebuilt environments, to rehearse past them")

    def run(self, args) -> int:
        from rackbench.cluster import backend_for
        from rackbench.cluster.slurm import partition_nodes
        from rackbench.load.preflight import check_steps
        from rackbench.server import preflight, standin
        cat = catalog(args)
        if args.on not in cat.clusters:
            raise SystemExit(f"rackbench rehearse: no cluster {args.on!r} (known: {', '.join(sorted(cat.clusters))})")
        cluster = cat.clusters[args.on]
        if not cluster.slurm.node_local or cluster.backend != "slurm":
            raise SystemExit(f"rackbench rehearse: cluster {args.on} is no stand-in (a Slurm cluster file with "
                             "slurm.node_local disks, e.g. gb200-local)")
        why = backend_for(cluster).unavailable()
        if why:
            raise SystemExit(f"rackbench rehearse: cannot allocate on {cluster.name}: {why} (as root, "
                             "scripts/slurm-local start starts the local Slurm)")
        results = ResultsFolder.at(Path(args.results_dir).absolute())
        nodes = partition_nodes(cluster.slurm.partition)
        own = args.installs == "own"
        for prof in (preflight.retarget(p, cluster, own) for p in many(cat, args.targets)):
            installs = "its own cluster's installs" if own else f"{cluster.name}'s prebuilt environments"
            print(f"{prof.id} rehearsed on {cluster.name} (nodes {', '.join(nodes)}), with {installs}:", flush=True)
            print("1. a fresh allocation, nothing staged on the nodes' disks:", flush=True)
            bare = preflight.allocate_and_check(prof, results, Path.cwd(), extra=check_steps(prof, results))
            print("\n".join("   " + line for line in bare.lines()), flush=True)
            if bare.unallocated:
                print("   a first run stops here, before sbatch; to rehearse past it here: --installs stand-in",
                      flush=True)
                continue
            made = standin.stage(prof, nodes)
            try:
                staged = ", ".join(sorted({str(p.name) for p in made})) or "nothing (already there)"
                print(f"2. with the stand-in staged on every node ({staged}; rackbench/data/standin: no weights):",
                      flush=True)
                ready = preflight.allocate_and_check(prof, results, Path.cwd(), extra=check_steps(prof, results))
                print("\n".join("   " + line for line in ready.lines()), flush=True)
            finally:
                standin.remove(made)
        return 0


COMMANDS = (RehearseCommand,)
