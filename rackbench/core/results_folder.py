"""The results folder: every path rackbench writes or reads in it is spelled here, and nowhere else.

::

    <results>/                          what --results-dir names (default results/)
      history.sqlite                    the results history (rackbench.history.store), shared by every run
      .hf-cache/                        the load generator's offline cache (tokenizers, corpora, dataset mmap)
      latest -> runs/<run id>           the last session started here: what reports read when given <results>
      runs/<run id>/                    one pytest session's files; no two sessions share one
        points/<case>.json              every point's result: what reports, baselines and the history read
        summary.md  manifest.json  manifest.<worker>.json
        searches/<profile>.json         a search's answer and probes; rankings/<name>.json: a ranking of them
        report/                         report.md, points.csv, plots, report.html (rackbench.core.report_folder)
        <profile>/                      one profile's allocation
          logs/<process>.log            every node process (infra, frontend, workers, preflight, client);
                                        logs-<part>/ per allocation when the profile's points are split
          deployment.json  <job>.sbatch  <job>.sbatch.log  <job>.heartbeat  infra-<job>/{etcd,nats}/
          dynamo-discovery/
          <case>/                       one point
            result.json  requests.csv  trace.jsonl  server-logs/
            <generator>/  <generator>.log  <generator>-command.txt  <generator>-work/

A folder with ``points/`` directly in it (older sessions, checked-in test data) reads as one run whose base is
itself. Paths are plain ``Path`` objects; a node that sees the folder under another name gets the same relative
layout (rackbench.server.placement passes the strings on). Nothing here creates anything.

Every name that becomes part of a path (a run id, profile id, case id, model, cluster) passes
:func:`rackbench.core.names.name` first: a results file is untrusted input (copied between clusters, or written by
hand), and a case id with ``../`` in it once made ``rackbench report`` write outside its folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rackbench.core.names import name

POINTS = "points"
HISTORY = "history.sqlite"
REPORT = "report"
RUNS = "runs"
LATEST = "latest"
@dataclass(frozen=True)
class CaseFolder:
    """One (profile, concurrency) point's files."""

    root: Path

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def requests(self) -> Path:
        """Every request the point sent, in rackbench's own form (rackbench.results.requests): what the history
        and the gates read, never the load generator's own files."""
        return self.root / "requests.csv"

    @property
    def requests_archived(self) -> Path:
        """The same file gzip-compressed, as a results folder kept for the record may hold it (tests/data)."""
        return self.root / "requests.csv.gz"

    @property
    def trace(self) -> Path:
        return self.root / "trace.jsonl"

    @property
    def trace_reuse(self) -> Path:
        """What prefix reuse the trace allows (rackbench/tools/trace_reuse.py, written in the client's step)."""
        return self.root / "trace-reuse.json"

    @property
    def server_logs(self) -> Path:
        """Copies of every server log, kept when the point failed."""
        return self.root / "server-logs"

    def server_log(self, process: str, rank: int) -> Path:
        return self.server_logs / f"{process}-node{rank}.log"

    def load_dir(self, generator: str) -> Path:
        """The load generator's own output (AIPerf's artifact directory)."""
        return self.root / generator

    def load_log(self, generator: str) -> Path:
        return self.root / f"{generator}.log"

    def load_command(self, generator: str) -> Path:
        """The command that ran, as a line a shell can take back."""
        return self.root / f"{generator}-command.txt"

    def telemetry(self, node: str) -> Path:
        """GPU telemetry sampled on ``node`` during the point (nvidia-smi's CSV)."""
        return self.root / f"telemetry-{node}.csv"

    def host_samples(self, rank: int) -> Path:
        """The CPU use of the point's processes sampled on node rank ``rank`` (rackbench.server.host; JSON lines)."""
        return self.root / f"host-{rank}.jsonl"

    def load_work(self, generator: str) -> Path:
        """Scratch the generator may keep between its own steps (dataset mmap, caches)."""
        return self.root / f"{generator}-work"

    @property
    def series(self) -> Path:
        """The point's time series (counters scraped while it ran)."""
        return self.root / "series.json"


@dataclass(frozen=True)
class ProfileFolder:
    """One profile's allocation: its processes' logs and the files of its job. A profile whose points are split over
    several allocations (``profile.allocations: fit``) keeps each part's logs apart (``logs-<part>``)."""

    root: Path
    part: int | None = None

    @property
    def logs(self) -> Path:
        return self.root / ("logs" if self.part is None else f"logs-{self.part}")

    def log(self, process: str) -> Path:
        return self.logs / f"{process}.log"

    @property
    def model_generation_log(self) -> Path:
        return self.logs / "model-generation.log"

    @property
    def deployment(self) -> Path:
        return self.root / ("deployment.json" if self.part is None else f"deployment-{self.part}.json")

    def job_script(self, job_name: str) -> Path:
        return self.root / f"{job_name}.sbatch"

    def job_log(self, job_name: str) -> Path:
        return self.root / f"{job_name}.sbatch.log"

    def heartbeat(self, job_name: str) -> Path:
        """What the session rewrites while it holds the job; the holder ends the job when it stops changing."""
        return self.root / f"{job_name}.heartbeat"

    def infra_state(self, job_id: str) -> Path:
        """etcd and NATS data of an allocation whose steps run outside containers (fresh per allocation)."""
        return self.root / f"infra-{job_id}"

    @property
    def discovery(self) -> Path:
        """Dynamo's file discovery store (clusters whose discovery is ``file``)."""
        return self.root / "dynamo-discovery"

    def case(self, case_id: str) -> CaseFolder:
        return CaseFolder(self.root / name(case_id, "case id"))


@dataclass(frozen=True)
class ResultsFolder:
    """One run's files (``root``) inside the folder --results-dir names (``base``: the history and the cache that
    every run shares)."""

    root: Path
    base: Path | None = None

    @classmethod
    def at(cls, path: Path | str) -> "ResultsFolder":
        """The run a path names: a run folder itself (``<results>/runs/<id>`` or ``latest``), else the latest run of
        a results folder, else a flat folder (points/ directly in it; also what a session has not yet written)."""
        path = Path(path)
        if path.parent.name == RUNS:
            return cls(path, path.parent.parent)
        if path.name == LATEST:
            return cls(path, path.parent)
        if not (path / POINTS).is_dir() and (path / LATEST).is_dir():
            return cls(path / LATEST, path)
        runs = sorted(p for p in (path / RUNS).glob("*") if (p / POINTS).is_dir()) if not (path / POINTS).is_dir() \
            else []
        if runs:            # a results folder copied without its `latest` link: its newest run (ids start with time)
            return cls(runs[-1], path)
        return cls(path, path)

    @classmethod
    def for_run(cls, base: Path | str, run_id: str) -> "ResultsFolder":
        """Where a new session with ``run_id`` writes."""
        return cls(Path(base) / RUNS / name(run_id, "run id"), Path(base))

    @property
    def shared(self) -> Path:
        return self.base if self.base is not None else self.root

    @property
    def latest(self) -> Path:
        """The link to the last run started in the base folder."""
        return self.shared / LATEST

    @property
    def run_link(self) -> str:
        """What ``latest`` points at (relative, so the folder can move)."""
        return str(self.root.relative_to(self.shared)) if self.root.is_relative_to(self.shared) else str(self.root)

    @property
    def history(self) -> Path:
        return self.shared / HISTORY

    @property
    def points(self) -> Path:
        return self.root / POINTS

    def point(self, case_id: str) -> Path:
        return self.points / f"{name(case_id, 'case id')}.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.md"

    @property
    def searches(self) -> Path:
        return self.root / "searches"

    def search(self, profile_id: str) -> Path:
        """A profile's search (profile.search): its answer, bracket and probes (each probe is also a point)."""
        return self.searches / f"{name(profile_id, 'profile id')}.json"

    @property
    def rankings(self) -> Path:
        return self.root / "rankings"

    def ranking(self, ranking: str) -> Path:
        """A ranking of the session's searches (recipes/rankings/): its order, verdicts and plan."""
        return self.rankings / f"{name(ranking, 'ranking name')}.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def manifest_part(self, worker: str) -> Path:
        return self.root / f"manifest.{worker}.json"

    def manifest_parts(self) -> list[Path]:
        return sorted(self.root.glob("manifest.*.json"))

    @property
    def report(self) -> Path:
        return self.root / REPORT

    @property
    def hf_cache(self) -> Path:
        return self.shared / ".hf-cache"

    def profile(self, profile_id: str, part: int | None = None) -> ProfileFolder:
        return ProfileFolder(self.root / name(profile_id, "profile id"), part)

    def case(self, profile_id: str, case_id: str) -> CaseFolder:
        return self.profile(profile_id).case(case_id)

    def problem(self) -> str | None:
        """Why this is not a results folder a session wrote (one line), or None."""
        if not self.root.is_dir():
            return f"{self.root}: no such folder" if not self.root.exists() else \
                f"{self.root}: a file, not a results folder"
        if not self.points.is_dir():
            return (f"{self.root}: no {POINTS}/ folder in it; give the folder a benchmark session wrote "
                    "(--results-dir, default results/)")
        return None
