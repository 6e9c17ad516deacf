"""A ranking of deployments by what each serves within one SLO tier, or an honest refusal: over the searches of one
or more results folders, each deployment's answer (the highest load meeting the tier) and the good output tokens per
second per GPU it serves there, with the attainment's interval (rackbench.results.search.at_answer). Per GPU is per
cost on one cluster: the cheapest deployment per million tokens is the one that serves the most per GPU.

A pair is ranked only where the two arms differ in the deployment alone: the same tier, model, GPU (the card each
point ran on: rackbench.results.card), load (the trace's sessions, seed and shape) and, unless it is the factor
being ranked, image; no answer point on a warm prefix cache or with a KV router that applied no KV event (the A/B's
own reasons, rackbench.report.offload.void). Otherwise: "cannot rank", and why.

The verdict of a ranked pair: the ratio of their goodputs with the interval the two attainment intervals bound
(both hold together with at least 90% confidence, Bonferroni over two 95% intervals): ``better`` or ``worse`` where
it excludes 1, ``within noise`` where it does not. The measured output rate is taken as it was measured: its
run-to-run noise is not in the interval (docs/statistics.md#not-claimed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from rackbench.core.format import interval, number
from rackbench.core.former_name import as_named_before
from rackbench.core.results_folder import ResultsFolder
from rackbench.report.offload import void
from rackbench.results.card import card
from rackbench.results.files import read, stored_searches
from rackbench.results.model import PointResult
from rackbench.results.search import at_answer, probe_of

@dataclass(frozen=True)
class Arm:
    profile: str
    tier: str
    goal: str                   # the tier's limits and target, as text: arms of different goals never rank
    answer: int | None
    good: float | None          # good output tok/s per GPU at the answer
    low: float | None
    high: float | None
    traits: tuple[tuple[str, object], ...]
    void: tuple[str, ...] = ()


def traits(r: PointResult, factor: str) -> dict[str, object]:
    i = r.identity
    out = {"model": i.model_repo or i.model,
           "GPU": i.card or card(r.machine.nodes if r.machine else []) or i.gpu_type,
           "load (its trace: sessions, seed, shape)": i.load_fingerprint or i.dataset}
    if factor != "image":
        out["image"] = i.image
    return out


def arm(answer: dict, point: PointResult | None, factor: str = "deployment") -> Arm:
    """One search's arm: its answer and, from the answer's point, what it serves there."""
    goal = f"{json.dumps(answer.get('limits'), sort_keys=True)} at {answer.get('target')}"
    if point is None:
        return Arm(answer["profile"], answer["tier"], goal, answer.get("answer"), None, None, None, ())
    at = at_answer(probe_of(point.identity.concurrency, point, answer["tier"], None)) or {}
    low, high = at.get("good_output_tps_per_gpu_interval") or (None, None)
    return Arm(answer["profile"], answer["tier"], goal, answer.get("answer"), at.get("good_output_tps_per_gpu"),
               low, high, tuple(sorted(traits(point, factor).items())), tuple(void(point)))


def _short(value: object) -> str:
    """A sha256 fingerprint as its first 12 digits (what a person compares), anything else as it is."""
    text = str(value)
    return f"{text[:12]}…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


def pair(a: Arm, b: Arm) -> dict:
    """``a`` against ``b``: better, worse, within noise, or cannot rank (with why)."""
    why = []
    if a.goal != b.goal:
        why.append(f"their tiers differ ({a.goal} against {b.goal})")
    for name, value in dict(a.traits).items() if a.traits and b.traits else ():   # an arm without an answer has none
        other = dict(b.traits).get(name)
        if as_named_before(str(other)) != as_named_before(str(value)):     # a generated model's id under either name
            why.append(f"{name} differs ({_short(value)} against {_short(other)})")
    why += [*a.void, *b.void]
    for x in (a, b):
        if x.answer is None:
            why.append(f"{x.profile} has no load meeting the tier")
        elif x.low is None or not x.high:
            why.append(f"{x.profile}'s answer has no goodput interval")
    out = {"a": a.profile, "b": b.profile}
    if why:
        return {**out, "verdict": "cannot rank", "why": why}
    ratio, low, high = a.good / b.good, a.low / b.high, a.high / b.low
    verdict = "better" if low > 1 else "worse" if high < 1 else "within noise"
    return {**out, "verdict": verdict, "ratio": ratio, "interval": [low, high], "confidence": 0.90}


def load(results: list[Path], factor: str = "deployment", only: set[str] | None = None) -> list[Arm]:
    """Every search of the folders (of the profiles ``only`` names, where it is given), as arms (a profile searched
    in several folders named with its folder); the answer's point is read for those alone."""
    arms = []
    for folder in results:
        rf = ResultsFolder.at(folder)
        for answer in stored_searches(rf.root):
            if only is not None and answer.get("profile") not in only:
                continue
            point = None
            if answer.get("answer") is not None:
                pid = next((p["case_id"] for p in answer.get("probes", []) if p["concurrency"] == answer["answer"]),
                           None)
                point = read(rf.point(pid)) if pid and rf.point(pid).is_file() else None
            arms.append((rf.root.name, arm(answer, point, factor)))
    twice = {a.profile for _, a in arms if sum(b.profile == a.profile for _, b in arms) > 1}
    return [replace(a, profile=f"{a.profile} ({where})") if a.profile in twice else a for where, a in arms]


def ranking(arms: list[Arm]) -> list[dict]:
    """Per tier name: the arms by what they serve (most first) and every pair's verdict."""
    out = []
    for tier in sorted({x.tier for x in arms}):
        group = sorted((x for x in arms if x.tier == tier), key=lambda x: -(x.good or 0.0))
        out.append({"tier": tier, "order": [x.profile for x in group],
                    "pairs": [pair(a, b) for i, a in enumerate(group) for b in group[i + 1:]]})
    return out


def text(arms: list[Arm], tiers: list[dict]) -> list[str]:
    """The ranking as the terminal and report.md show it: per tier, each arm's answer and goodput, then each pair."""
    by, out = {a.profile: a for a in arms}, []
    for t in tiers:
        out.append(f"tier {t['tier']}:")
        for name in t["order"]:
            a = by[name]
            out.append(f"  {name}: " + (f"c{a.answer}, {number(a.good, 'rate')} good output tok/s per GPU "
                                        f"{interval(a.low, a.high, 'rate')}" if a.good is not None else
                                        "no load meeting the tier" if a.answer is None else f"c{a.answer}"))
        for p in t["pairs"]:
            said = (f"cannot rank: {'; '.join(p['why'])}" if p["verdict"] == "cannot rank" else
                    f"{p['verdict']}: x{p['ratio']:.2f} [x{p['interval'][0]:.2f}, x{p['interval'][1]:.2f}] "
                    "(at least 90%)")
            out.append(f"  {p['a']} against {p['b']}: {said}")
    return out


def stored(results_dir: Path) -> list[tuple[Path, dict | str]]:
    """The rankings a run stored (``rankings/<name>.json``, by the ranking's case): each file with what it holds, or
    why it could not be read."""
    from rackbench.core.files import read_json
    folder = ResultsFolder.at(results_dir).rankings
    out: list[tuple[Path, dict | str]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append((path, read_json(path)))
        except ValueError as err:
            out.append((path, str(err)))
    return out


def terminal_lines(results_dir: Path) -> list[str]:
    """What the terminal summary says of the run's rankings."""
    return [line for path, r in stored(results_dir)
            for line in ([f"ranking {r['ranking']} ({path}):", *r["text"]] if isinstance(r, dict) else
                         [f"ranking {path.stem}: not read: {r}"])]


def section(results_dir: Path, held: dict) -> str:
    """report.md's rankings, each with what its plan said it would cost beside what its arms' allocations held
    (``held``: profile -> rackbench.results.accounting.Held)."""
    out = []
    for path, r in stored(results_dir):
        if not isinstance(r, dict):
            out += [f"## Ranking {path.stem}", "", f"Not read: {r}", ""]
            continue
        lo, mid, hi = r["plan"]["gpu_hours"]
        spent = [held[a].gpu_hours for a in r["arms"] if a in held]
        cost = (f"The plan said {lo:.2f}-{hi:.2f} GPU-hours (median {mid:.2f}); "
                + (f"its arms' allocations held {sum(spent):.2f}"
                   + (" (inside that range)." if lo <= sum(spent) <= hi else " (outside that range).")
                   if len(spent) == len(r["arms"]) else "what its arms held is not in this folder's manifest."))
        out += [f"## Ranking {r['ranking']}", "", r.get("description") or "", "", "```", *r["text"], "```", "", cost,
                ""]
    return "\n".join(out)
