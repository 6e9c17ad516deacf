"""When a point's number is known (``profile.load.stop``): the rule that ends an adaptive run (the user's side:
docs/load.md#run-length-steady-state-precision-adaptive-stopping-profileloadstop---run-length).

At checkpoints t_k = min_s x growth^k (geometric, so the number of looks grows with the log of the run and repeated
looks cost little coverage; Jennison and Turnbull's group-sequential designs space them so), once ``min_requests``
requests have completed, the engines' output-token series so far (one rate per slice, rackbench.load.series) is
analysed (rackbench.load.steady: MSER-5 truncation, batch means, Heidelberger-Welch): the run stops when the 95%
interval of the mean after truncation is within ``target`` of it **and** the series is stationary. Otherwise it runs
to ``duration_s``. Pure: the caller scrapes and stops the generator.
"""

from __future__ import annotations

from dataclasses import dataclass

from rackbench.load import steady
from rackbench.recipe.schema.sweep import StopRule


@dataclass(frozen=True)
class Decision:
    stop: bool
    reason: str
    analysis: steady.Steady | None = None


def checkpoints(rule: StopRule, duration_s: float) -> list[float]:
    out, t = [], rule.min_s
    while t < duration_s:
        out.append(round(t, 3))
        t *= rule.growth
    return out


def decide(rule: StopRule, rates: list[float], completed: float, elapsed: float) -> Decision:
    """Whether to stop now, at a checkpoint ``elapsed`` s into the run, with ``completed`` requests done."""
    if elapsed < rule.min_s:
        return Decision(False, f"before the minimum {rule.min_s:g} s")
    if completed < rule.min_requests:
        return Decision(False, f"{completed:.0f} of the {rule.min_requests} requests a p99 needs")
    a = steady.analyse(rates, rule.slice_s)
    if a.stationary is None or a.half_width_rel is None:
        return Decision(False, f"{a.batches} batch means after the warm-up: too few to judge", a)
    precise = a.half_width_rel <= rule.target
    if precise and a.stationary:
        return Decision(True, f"precise and steady at {elapsed:.0f} s: 95% interval ±{a.half_width_rel:.1%} "
                              f"(target ±{rule.target:.0%}), stationary (p={a.p_value:.2f}), warm-up "
                              f"{a.truncated_s:.0f} s", a)
    why = [] if precise else [f"±{a.half_width_rel:.1%} > ±{rule.target:.0%}"]
    if not a.stationary:
        why.append(f"not stationary (p={a.p_value:.3f})")
    return Decision(False, "; ".join(why), a)


def planned_looks(rule: StopRule, duration_s: float) -> int:
    """The looks a decide-stopped run plans: one per checkpoint, and the cap (the run's end, judged on all it saw)
    as the last. The error budget is spread over all of them: judging the cap at a plain 95% after K looks at
    1 - 0.05 / K spent up to twice the nominal error."""
    return len(checkpoints(rule, duration_s)) + 1


class Checkpoints:
    """Looks at a run only at its checkpoints: ``poll(elapsed, ...)`` is called often, ``look`` once per checkpoint
    passed, and after a stop nothing more is said."""

    def __init__(self, rule: StopRule, duration_s: float):
        self.rule = rule
        self.pending = checkpoints(rule, duration_s)
        self.planned = max(1, len(self.pending))          # the looks the run plans
        self.looks: list[tuple[float, str]] = []          # (checkpoint, what it found)
        self.decision: Decision | None = None

    def look(self, elapsed: float, *args) -> Decision:
        raise NotImplementedError

    def poll(self, elapsed: float, *args) -> str | None:
        if self.decision is not None and self.decision.stop:
            return None
        if not self.pending or elapsed < self.pending[0]:
            return None
        while self.pending and self.pending[0] <= elapsed:
            self.pending.pop(0)
        found = self.look(elapsed, *args)
        self.looks.append((round(elapsed, 1), found.reason))
        self.decision = found
        return found.reason if found.stop else None


class Controller(Checkpoints):
    """The adaptive rule applied live: ``poll(elapsed, rates, completed)``."""

    def look(self, elapsed: float, rates, completed) -> Decision:
        return decide(self.rule, list(rates()), completed(), elapsed)


MIN_DECIDE_REQUESTS = 100      # a decision rests on at least this many profiled requests (see DecideController)


class DecideController(Checkpoints):
    """``--run-length decide``: stop once the point's decision is known, not its number (#32). At the same
    geometric checkpoints as the adaptive rule (after ``min_s``), the generator's profiled requests so far are
    read and ``decide(requests, looks)`` answers with the reason to stop (its gate resolved) or None. ``looks`` is
    how many looks the run plans, the cap included (planned_looks): a decider corrects its confidence for them
    (Bonferroni over the planned looks, conservative beside O'Brien-Fleming's boundaries; Jennison and Turnbull,
    *Group Sequential Methods*, 2000), so stopping at the first look that resolves keeps the overall error at its nominal level. No decision
    rests on fewer than MIN_DECIDE_REQUESTS requests: consecutive requests of an agentic replay are correlated, and
    a burst of slow or fast ones at the start would otherwise decide alone. Pure: the caller reads and stops."""

    def __init__(self, rule: StopRule, duration_s: float, read, decide):
        super().__init__(rule, duration_s)
        self.read, self.decide = read, decide
        self.planned = planned_looks(rule, duration_s)     # the cap counted: results.build judges it at this too

    def look(self, elapsed: float, *_) -> Decision:
        requests = [r for r in self.read() if r.profiled]
        if len(requests) < MIN_DECIDE_REQUESTS:
            return Decision(False, f"{len(requests)} of the {MIN_DECIDE_REQUESTS} requests a decision needs")
        reason = self.decide(requests, self.planned)
        return Decision(reason is not None, reason or f"not resolved at {len(requests)} requests")
