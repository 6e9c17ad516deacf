"""The runtime's own time limits, one owner for each: how long a run waits for each step before it gives up on it.
The time budget (rackbench.catalog.budget) adds them up against a job's time limit; the steps that wait read them
here (so the cluster, the server and the load generator stand on core/, not on the recipe catalog)."""

STOP_MARGIN_S = 900          # past duration + warmup grace, the generator is stopped (rackbench.load.measure)
INTERRUPT_GRACE_S = 180      # after that interrupt, how long it may take to write its files (rackbench.load.generator)
CLIENT_SETUP_S = 1800        # the client step's preamble (environment made once, tokenizer copy) before the generator
PREFLIGHT_TIMEOUT_S = 900    # the node checks before any server (rackbench.server.preflight)
MOUNTS_TIMEOUT_S = 120       # the look at the containers' mount sources (rackbench.server.mounts)
KILL_WAIT_S = 10             # after a KILL, how long a step may take to go (rackbench.cluster.slurm)
RELEASE_TIERS = 3            # client, then frontend and workers, then etcd/NATS: each TERM, grace, KILL
