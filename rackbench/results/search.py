"""The search for the highest concurrency that meets an SLO tier (profile.search), as pure decisions: which
concurrency to probe next given the verdicts so far, and what the probes answer.

Probes start at the lowest concurrency of the range and double while the tier is met (GuideLLM's and AIPerf's
searches ramp the same way); after the first probe that does not meet it, they bisect between the last met and the
first not met until the two are within the tolerance (a share of the last met, at least 1 apart). A probe's
verdict is its tier's (rackbench.results.slo): ``met`` with 95% confidence passes; ``missed`` and ``unresolved``
do not, so the answer is a concurrency shown to meet the tier, never one that only might. The answer is the highest
met concurrency, with its bracket (last met, first not met). An answer taken before the search ends (the one stored
after each probe, so that an allocation lost mid-search keeps what its probes found) says so and names the next
probe; its answer is then a lower bound, found so far. The answer carries what serving there costs (``at_answer``:
goodput per GPU with its interval, energy per output token, the price of a million tokens) beside what the search
itself spent (GPU-hours and energy of its probes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLIFF = 0.3        # attainment falling more than this between the bracket's ends: the boundary is sharper than probed


@dataclass(frozen=True)
class Probe:
    concurrency: int
    verdict: str | None            # the tier's: met | missed | unresolved | None (no request to judge)
    attainment: float | None = None
    low: float | None = None
    high: float | None = None
    case_id: str = ""
    passed: bool | None = None     # the probe's own verdict (its gates), apart from the tier
    gpu_hours: float | None = None  # its measured window x its GPUs
    energy_j: float | None = None   # its GPUs' board energy over that window (None: no power samples)
    good_output_tps_per_gpu: float | None = None   # output tokens of the tier's good requests, per second per GPU
    joules_per_output_token: float | None = None
    cost_per_m_output_tokens: float | None = None  # where the cluster file declares a GPU-hour price
    currency: str | None = None


def probe_of(concurrency: int, result, tier: str, passed: bool | None, judged=None) -> Probe:
    """A probe as its stored result (rackbench.results.model.PointResult) says: its tier's verdict and interval
    (or ``judged``'s: the tier judged anew, by limits relative to the first probe), the GPU-hours its window
    measured, its GPU energy."""
    t = judged if judged is not None else next((x for x in result.slo if x.tier == tier), None)
    e = result.economics
    return Probe(concurrency, t.verdict if t else None, t.attainment if t else None, t.low if t else None,
                 t.high if t else None, result.identity.case_id, passed,
                 gpu_hours=(result.throughput.duration_s or 0.0) * result.throughput.gpus / 3600,
                 energy_j=e.energy_j if e is not None else None,
                 good_output_tps_per_gpu=t.good_output_tps_per_gpu if t else None,
                 joules_per_output_token=e.joules_per_output_token if e is not None else None,
                 cost_per_m_output_tokens=e.cost_per_m_output_tokens if e is not None else None,
                 currency=e.currency if e is not None else None)


def at_answer(p: Probe | None) -> dict | None:
    """What serving at the answer costs, as its probe measured it: goodput per GPU with an interval, energy per output
    token, and the price of a million output tokens where the cluster file declares one. The goodput's interval is
    the attainment's (good requests share the measured output rate: good = rate x share), the window's rate taken as
    measured; energy and price rest on that rate too, whose interval is not claimed (docs/statistics.md), so they
    carry none."""
    if p is None:
        return None
    good, share = p.good_output_tps_per_gpu, p.attainment
    scaled = (None if good is None or not share or p.low is None or p.high is None
              else [good * p.low / share, good * p.high / share])
    return {"concurrency": p.concurrency, "case_id": p.case_id,
            "good_output_tps_per_gpu": good, "good_output_tps_per_gpu_interval": scaled,
            "joules_per_output_token": p.joules_per_output_token,
            "cost_per_m_output_tokens": p.cost_per_m_output_tokens, "currency": p.currency,
            "interval_basis": "goodput: the attainment's interval over the measured output rate; energy and cost: "
                              "point figures (the rate's own interval is not claimed)"}


@dataclass
class Search:
    lo: int
    hi: int
    tolerance: float
    max_probes: int
    probes: list[Probe] = field(default_factory=list)

    def met(self, p: Probe) -> bool:
        return p.verdict == "met"

    @property
    def bracket(self) -> tuple[int | None, int | None]:
        """(the highest concurrency met below every one not met, the lowest not met)."""
        fails = [p.concurrency for p in self.probes if not self.met(p)]
        first_fail = min(fails) if fails else None
        passes = [p.concurrency for p in self.probes if self.met(p) and (first_fail is None or p.concurrency < first_fail)]
        return (max(passes) if passes else None), first_fail

    def next(self) -> int | None:
        """The next concurrency to probe, or None when the search is done."""
        if len(self.probes) >= self.max_probes:
            return None
        if not self.probes:
            return self.lo
        last_pass, first_fail = self.bracket
        if first_fail is None:                                   # still ramping
            top = max(p.concurrency for p in self.probes)
            return None if top >= self.hi else min(self.hi, top * 2)
        if last_pass is None:
            return None                                          # the lowest concurrency already fails
        return None if self.resolved() else (last_pass + first_fail) // 2

    def resolved(self) -> bool:
        """The bracket is within the tolerance (or no closer probe is left between its ends)."""
        last_pass, first_fail = self.bracket
        return (last_pass is not None and first_fail is not None and
                (first_fail - last_pass <= max(1, int(self.tolerance * last_pass)) or
                 (last_pass + first_fail) // 2 in {p.concurrency for p in self.probes}))

    def add(self, probe: Probe) -> None:
        self.probes.append(probe)

    def answer(self) -> dict:
        last_pass, first_fail = self.bracket
        by_c = {p.concurrency: p for p in self.probes}
        cliff = None
        if last_pass is not None and first_fail is not None:
            a, b = by_c[last_pass].attainment, by_c[first_fail].attainment
            if a is not None and b is not None and a - b > CLIFF:
                cliff = (f"attainment falls from {a:.0%} at c{last_pass} to {b:.0%} at c{first_fail}: sharper than "
                         "the probes resolve")
        top = max((p.concurrency for p in self.probes), default=None)
        pending = self.next()
        why = (f"unfinished: {len(self.probes)} probe(s) stored, c{pending} next" if pending is not None else
               ("the lowest concurrency of the range does not meet the tier"
                if getattr(by_c.get(self.lo), "verdict", None) == "missed" else "the lowest concurrency of the range is not shown to meet the tier (its interval spans the "
                "target: a longer probe, profile.load.duration_s, narrows it)") if last_pass is None else
               "every probe met the tier, up to the range's top" if first_fail is None and top >= self.hi else
               f"stopped at {self.max_probes} probes, still meeting the tier at c{top}" if first_fail is None else
               f"bracketed within the tolerance ({self.tolerance:.0%})" if self.resolved() else
               f"stopped at {self.max_probes} probes, before the bracket was within the tolerance")
        hours = [p.gpu_hours for p in self.probes if p.gpu_hours is not None]
        joules = [p.energy_j for p in self.probes if p.energy_j is not None]
        return {"answer": last_pass, "bracket": [last_pass, first_fail], "why": why, "cliff": cliff,
                "next": pending, "at_answer": at_answer(by_c.get(last_pass)),
                "gpu_hours_measured": sum(hours) if hours else None,
                "energy_j": sum(joules) if self.probes and len(joules) == len(self.probes) else None,
                "probes": [p.__dict__ for p in self.probes]}


def probe_counts(lo: int, hi: int, tolerance: float, max_probes: int) -> list[int]:
    """How many probes the search takes for each place its boundary may lie (every concurrency of the range met up
    to it, none above; and none met at all), by the rule's own decisions: the range of what a search costs before any
    probe is run (pure)."""
    counts = []
    for boundary in range(lo - 1, hi + 1):
        s = Search(lo, hi, tolerance, max_probes)
        while (c := s.next()) is not None:
            met = c <= boundary
            s.add(Probe(c, "met" if met else "missed", 1.0 if met else 0.0, 1.0 if met else 0.0,
                        1.0 if met else 0.0))
        counts.append(len(s.probes))
    return counts
