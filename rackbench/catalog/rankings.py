"""The catalog's rankings (``recipes/rankings/*.yaml``, rackbench.recipe.schema.ranking): each checked against the
profiles it names, so a ranking that cannot answer is refused before any node is held, naming the file, the key and
the fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rackbench.core.errors import ConfigError, Problem
from rackbench.recipe.layering import load_named, parse_file
from rackbench.recipe.profile import Profile
from rackbench.recipe.schema.ranking import RankingSpec

FOLDER = "rankings"


@dataclass(frozen=True)
class Ranking:
    """A ranking with its arms resolved to the catalog's profiles (in the order they run: the reference first)."""
    spec: RankingSpec
    file: str
    arms: tuple[Profile, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def markers(self) -> list[str]:
        """Every arm's markers (a GB200 ranking is selected by ``-m gb200``)."""
        return sorted({m for p in self.arms for m in p.markers})

    def reference_of(self, profile_id: str) -> str | None:
        """The arm whose limits ``profile_id`` is judged by, where that is another arm."""
        ref = self.spec.reference
        return ref if ref is not None and ref != profile_id and profile_id in self.spec.arms else None


def _load(path: Path) -> RankingSpec:
    return parse_file(RankingSpec, path, "ranking")


def problems_of(spec: RankingSpec, file: str, profiles: dict[str, Profile]) -> list[Problem]:
    """What keeps a ranking from answering, each with its fix (pure)."""
    out = []
    searches = sorted(i for i, p in profiles.items() if p.spec.search is not None)
    for n, arm in enumerate(spec.arms):
        p = profiles.get(arm)
        if p is None:
            out.append(Problem(file, f"arms[{n}]", f"no profile {arm!r}", f"use a search profile's id: {searches}"))
        elif p.spec.search is None:
            out.append(Problem(file, f"arms[{n}]", f"{arm} is not a search (it has no profile.search)",
                               f"give it a search or name a search profile: {searches}"))
        elif p.spec.search.tier != spec.tier:
            out.append(Problem(file, f"arms[{n}]", f"{arm} searches tier {p.spec.search.tier!r}, the ranking "
                               f"{spec.tier!r}", f"set tier: {p.spec.search.tier} or the arm's search.tier"))
    if len(set(spec.arms)) != len(spec.arms):
        out.append(Problem(file, "arms", "an arm is named twice", "name each search profile once"))
    arms = [profiles[a] for a in spec.arms if a in profiles and profiles[a].spec.search is not None]
    relative = [p.id for p in arms if p.spec.search.relative is not None]
    if spec.reference is not None and spec.reference not in spec.arms:
        out.append(Problem(file, "reference", f"{spec.reference!r} is not one of the arms", f"name one of {spec.arms}"))
    elif spec.reference is not None and spec.reference not in relative:
        out.append(Problem(file, "reference", f"{spec.reference}'s tier is not relative (search.relative): it sets "
                           "no limits for the others", "remove `reference`, or give that arm search.relative"))
    elif spec.reference is None and relative:
        out.append(Problem(file, "reference", f"arms {relative} set their tier's limits from their own first probe: "
                           "their answers, judged by different limits, would not rank",
                           f"set `reference:` to one of {relative}"))
    return out


def load_rankings(root: Path, profiles: list[Profile], problems: list[Problem]) -> list[Ranking]:
    """Every ranking under ``<root>/rankings``; its problems appended to ``problems``."""
    by_id = {p.id: p for p in profiles}
    found: list[Problem] = []
    specs = load_named(Path(root) / FOLDER, _load, found)
    out = []
    for name, spec in specs.items():
        file = str(Path(root) / FOLDER / f"{name}.yaml")
        wrong = problems_of(spec, file, by_id)
        found += wrong
        if not wrong:
            order = sorted(spec.arms, key=lambda a: a != spec.reference)       # the reference runs first
            out.append(Ranking(spec, file, tuple(by_id[a] for a in order)))
    problems += found
    return out


def referenced(rankings: list[Ranking], profile_id: str) -> str | None:
    """The arm whose first probe sets ``profile_id``'s limits in the catalog's rankings, if any; ConfigError where two
    rankings name two different references for it."""
    refs = {r.reference_of(profile_id) for r in rankings} - {None}
    if len(refs) > 1:
        raise ConfigError(Problem(profile_id, "reference", f"rankings name two references for it: {sorted(refs)}",
                                  "give the rankings one reference"))
    return next(iter(refs), None)
