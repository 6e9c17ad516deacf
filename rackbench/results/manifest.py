"""The run manifest: every allocation and server start a run made, as JSON next to the results.

Each pytest process (xdist workers included) writes its own part atomically after every event; the
controlling process merges the parts into ``manifest.json`` at the end of the session.
"""

from __future__ import annotations

import json
import time

from rackbench.core.files import write_json
from rackbench.core.results_folder import ResultsFolder


class Manifest:
    def __init__(self, folder: ResultsFolder, run_id: str, worker: str = "main"):
        self.folder, self.run_id, self.worker = folder, run_id, worker
        self.data = {"run_id": run_id, "worker": worker, "allocations": [], "server_starts": []}

    @property
    def path(self):
        return self.folder.manifest_part(self.worker)

    def _save(self) -> None:
        write_json(self.path, self.data, indent=2)

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


def unreleased(folder: ResultsFolder) -> list[dict]:
    """Every allocation the run's manifests (merged or parts: a session killed before it merged) record as not
    released, with its run id; unreadable files are passed over."""
    out = []
    for path in [folder.manifest, *folder.manifest_parts()]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        out += [{**a, "run_id": data.get("run_id")} for a in data.get("allocations", []) if not a.get("released_at")]
    return out


def merge(folder: ResultsFolder, run_id: str) -> dict:
    """Combine this run's manifest parts into manifest.json; returns the merged manifest."""
    merged = {"run_id": run_id, "allocations": [], "server_starts": []}
    for part in folder.manifest_parts():
        data = json.loads(part.read_text())
        if data.get("run_id") != run_id:
            continue
        merged["allocations"] += data["allocations"]
        merged["server_starts"] += data["server_starts"]
        part.unlink()
    write_json(folder.manifest, merged, indent=2)
    return merged
