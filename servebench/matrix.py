"""The sweep matrix: every (profile, concurrency) point, as pytest cases and as JSON."""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import Catalog
from .profile import Profile


@dataclass(frozen=True)
class Point:
    profile: Profile
    concurrency: int

    @property
    def id(self) -> str:
        return self.profile.case_id(self.concurrency)

    @property
    def markers(self) -> list[str]:
        return self.profile.cluster.markers + (["offload"] if self.profile.offload else [])

    def as_dict(self) -> dict:
        p = self.profile
        return {
            "id": self.id,
            "profile": p.id,
            "file": p.file,
            "cluster": p.cluster.name,
            "concurrency": self.concurrency,
            "layout": p.spec.layout.model_dump(),
            "gpus": p.topology.gpus,
            "labels": p.spec.labels.model_dump(by_alias=True),
            "markers": self.markers,
            "recipe_fingerprint": p.fingerprint,
        }


def points(catalog: Catalog) -> list[Point]:
    return [Point(p, c) for p in catalog.profiles for c in p.spec.concurrency]
