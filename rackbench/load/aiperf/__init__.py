"""AIPerf as rackbench's load generator (entry point ``rackbench.load_generators: aiperf``): real AIPerf in its
own venv, one `aiperf profile` per point.

AIPerf exits 0 with failed requests and writes no summary when every request fails, so nothing judges a run by
its exit code: the records (rackbench.load.aiperf.records) say what happened.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path, PurePosixPath

from rackbench.load.aiperf import records as aiperf_records
from rackbench.load.aiperf.command import OPTIONS, SESSION_HEADER, command, dataset_args
from rackbench.load.aiperf.setup import cache_env, environment, hub_repo, steps, tmpdir, tokenizer_id
from rackbench.load.generator import Invocation, LoadGenerator, LoadJob
from rackbench.load.records import LoadRecords
from rackbench.tools import CLIENT_CHECK, STAGE, in_folder

DEFAULT_BIN = ".venvs/aiperf/bin/aiperf"

__all__ = ["OPTIONS", "SESSION_HEADER", "AiperfGenerator", "command", "dataset_args", "environment", "steps",
           "DEFAULT_BIN"]


class AiperfGenerator(LoadGenerator):
    name = "aiperf"
    honours = frozenset({"dataset_entries", "cache_bust", "idle_gap_cap_s", "system_idle_gap_cap_s",
                         "trajectory_start", "agentic_cache_warmup_s", "max_context_tokens", "slice_duration_s",
                         "tokenizer_trust_remote_code", "burst_phase_starts", "dataset_timeout_s"})

    def __init__(self, executable: str | None = None):
        chosen = executable or os.environ.get("AIPERF_BIN")
        super().__init__(chosen or DEFAULT_BIN)
        self._chosen = chosen is not None

    def explicit(self) -> bool:
        return self._chosen

    def unavailable(self) -> str | None:
        if not Path(self.executable).exists():
            return f"AIPerf is not installed at {self.executable}: run scripts/install-servers (or pass --aiperf-bin)"
        return None

    def executable_for(self, job: LoadJob) -> list[str]:
        """--load-bin when given, else the cluster's client executable (as the client sees it), else the default."""
        if self.explicit() or not job.client.executable:
            return [self.executable]
        return list(job.client.executable)

    def command(self, job: LoadJob) -> list[str]:
        return command(job, self.executable_for(job), tokenizer_id(job))

    def invocation(self, job: LoadJob) -> Invocation:
        return Invocation(self.command(job), environment(job), job.case.load_dir(self.name),
                          job.case.load_log(self.name), job.case.load_command(self.name), {"tmp": tmpdir(job)},
                          steps(job))

    def client_check(self, job: LoadJob) -> list[str]:
        """rackbench/tools/client_check.py: AIPerf imports and parses the point's command, the tokenizer loads
        offline and is not empty, the corpus loads offline from the shared cache, the cache is writable."""
        c, load = job.client, job.point.profile.spec.load
        argv = self.command(job)
        req = {"node": c.node, "version": job.point.profile.recipe.identity.frameworks.get("aiperf"),
               "args": None if job.trace is not None else argv[argv.index("profile") + 1:],
               "tokenizer": tokenizer_id(job), "model": c.model, "trust_remote_code": load.tokenizer_trust_remote_code,
               "dataset": None if load.dataset == "generated" else load.dataset, "cache": c.cache,
               "stage": f"rackbench stage {job.point.profile.id} --cache {c.cache}"}
        return [c.python, in_folder(c.tools, CLIENT_CHECK), json.dumps(req)]

    def stage(self, profiles: list, cache: Path, models: dict[str, Path],
              drafts: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]] | None:
        """rackbench/tools/stage.py with AIPerf's interpreter (beside its executable): each public corpus loaded
        as AIPerf loads it, online, into the cache's HF layout; tokenizers of the model directories this host sees;
        the draft models (Hub repo -> the folder the cluster file names) downloaded."""
        corpora = sorted({p.spec.load.dataset for p in profiles if p.spec.load.dataset != "generated"})
        toks = [{"model": str(models[p.id]), "name": p.spec.model} for p in profiles if p.id in models]
        hub = sorted({repo for p in profiles if p.id not in models and (repo := hub_repo(p))})
        if not corpora and not toks and not drafts and not hub:
            return None
        python = str(Path(self.executable).with_name("python"))
        req = {"datasets": corpora, "tokenizers": list({t["name"]: t for t in toks}.values()), "cache": str(cache),
               "models": [{"repo": repo, "dest": dest} for repo, dest in sorted((drafts or {}).items())],
               "hub_tokenizers": hub}
        return [python, str(STAGE), json.dumps(req)], cache_env(PurePosixPath(cache))

    def run(self, inv: Invocation, timeout: float, **kw) -> int:
        try:
            return super().run(inv, timeout, **kw)
        finally:
            shutil.rmtree(inv.extra.get("tmp", ""), ignore_errors=True)    # here when the client ran here

    def records(self, out_dir: Path) -> LoadRecords:
        return aiperf_records.read(out_dir)

    def progress(self, out_dir: Path) -> str:
        return f"{aiperf_records.errors_so_far(out_dir)} errors so far"
