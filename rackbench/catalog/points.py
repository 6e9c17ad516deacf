"""The sweep matrix: every (profile, concurrency) point, as pytest cases and as JSON, with the allocation it runs in:
all of a profile's points share one, unless ``profile.allocations: fit`` splits them to fit the job's time limit
(rackbench.catalog.budget)."""

from __future__ import annotations

from dataclasses import dataclass

from rackbench.catalog.budget import budget
from rackbench.catalog.loader import Catalog
from rackbench.recipe.profile import Profile


def parse_allocation_key(key: str) -> tuple[str, int | None]:
    """(profile id, part) of an allocation key (:attr:`Point.allocation_key`); the part is None when not split."""
    profile, sep, part = key.rpartition("#")
    return (profile, int(part)) if sep and part.isdigit() else (key, None)


@dataclass(frozen=True)
class Point:
    profile: Profile
    concurrency: int
    allocation: int = 0          # which of the profile's allocations holds it (0 unless split to fit)
    allocations: int = 1         # how many the profile's points are split into

    @property
    def id(self) -> str:
        return self.profile.case_id(self.concurrency)

    @property
    def allocation_key(self) -> str:
        """The allocation this point runs in: the profile id, with the part when the points are split."""
        return self.profile.id if self.allocations == 1 else f"{self.profile.id}#{self.allocation + 1}"

    @property
    def markers(self) -> list[str]:
        return self.profile.markers

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
            "allocation": self.allocation_key,
        }


def split(profile: Profile) -> list[Point]:
    """A profile's points in order, each with its allocation (none for a search profile: its probes are chosen as
    it runs, in one allocation; see :func:`searches`)."""
    if profile.spec.search is not None:
        return []
    sizes = [len(profile.spec.concurrency)]
    if profile.spec.allocations == "fit":
        b = budget(profile)
        sizes = b.allocations() if b.limit_s is not None and not b.fits else sizes
    out, conc = [], list(profile.spec.concurrency)
    for k, n in enumerate(sizes):
        out += [Point(profile, c, k, len(sizes)) for c in conc[:n]]
        conc = conc[n:]
    return out


def points(catalog: Catalog) -> list[Point]:
    return [pt for p in catalog.profiles for pt in split(p)]


def searches(catalog: Catalog) -> list[Profile]:
    """The profiles that search for the highest concurrency meeting a tier (profile.search): one case each."""
    return [p for p in catalog.profiles if p.spec.search is not None]
