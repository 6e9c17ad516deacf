"""The run manifest: every allocation and server start a run made, as JSON next to the results.

Each pytest process (xdist workers included) writes its own part atomically after every event; the
controlling process merges the parts into ``manifest.json`` at the end of the session.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .yamlio import write_atomic


class Manifest:
    def __init__(self, results_dir: Path, run_id: str, worker: str = "main"):
        self.dir, self.run_id, self.worker = Path(results_dir), run_id, worker
        self.data = {"run_id": run_id, "worker": worker, "allocations": [], "server_starts": []}

    @property
    def path(self) -> Path:
        return self.dir / f"manifest.{self.worker}.json"

    def _save(self) -> None:
        write_atomic(self.path, json.dumps(self.data, indent=2) + "\n")

    def allocated(self, profile_id: str, info: dict) -> dict:
        entry = {"profile": profile_id, **info, "allocated_at": time.time(), "released_at": None}
        self.data["allocations"].append(entry)
        self._save()
        return entry

    def released(self, entry: dict, info: dict) -> None:
        entry.update(info, released_at=time.time())
        self._save()

    def server_started(self, profile_id: str, info: dict) -> None:
        self.data["server_starts"].append({"profile": profile_id, **info, "started_at": time.time()})
        self._save()


def merge(results_dir: Path, run_id: str) -> dict:
    """Combine this run's manifest parts into manifest.json; returns the merged manifest."""
    merged = {"run_id": run_id, "allocations": [], "server_starts": []}
    for part in sorted(Path(results_dir).glob("manifest.*.json")):
        data = json.loads(part.read_text())
        if data.get("run_id") != run_id:
            continue
        merged["allocations"] += data["allocations"]
        merged["server_starts"] += data["server_starts"]
        part.unlink()
    write_atomic(Path(results_dir) / "manifest.json", json.dumps(merged, indent=2) + "\n")
    return merged
