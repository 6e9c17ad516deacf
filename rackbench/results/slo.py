"""Service-level tiers at one point: which requests were good, the attainment with its interval, goodput.

A request is good when every limit of the tier holds (DistServe's definition of goodput, Zhong et al., OSDI 2024):
its TTFT, its time per output token after the first (TPOT: (E2E - TTFT) / (output tokens - 1), the request's mean
inter-token latency; a one-token answer has none to miss) and its end-to-end latency each at most the tier's limit.
A request that failed or never finished is not good.

The attainment's 95% interval is Wilson's (rackbench.core.stats.wilson) on an effective sample size: consecutive
requests of a replay share the server's state (a queue that builds, a batch that slows every member), so their
good/not-good outcomes are positively correlated and n of them carry less information than n independent ones. Two
estimates of that size, in the order the requests were sent; the smaller one is used:

* **AR(1)**: n (1 - r1) / (1 + r1) with r1 the sequence's lag-1 autocorrelation
  (rackbench.core.stats.effective_size; r1 <= 0: no correction). It sees correlation between neighbours only.
* **Batch means in time**: the window cut into 10 batches of equal duration by each request's send time
  (rackbench.core.stats.batch_size_in_time: a batch lasts a tenth of the run, 12 s of a 120 s look, 60 s of a
  600 s point, so its length grows with the run), the share's variance var(batch means) / k over the k non-empty
  batches, and the size it implies share (1 - share) / that variance. This one sees swings over many requests (an
  agentic replay's attainment moves by several points from minute to minute at the boundary: tests/data/grid-cpu),
  which the AR(1) one takes for independent noise. Few, long batches: Schmeiser (1982, "Batch size effects in the
  analysis of simulation output", Operations Research 30) shows 10-30 batches suffice once each outlasts the
  correlation, and fewer, longer ones are the safer side when it may not; 20 batches of equal request counts (6 s
  at a 120 s look) were far shorter than the correlation and covered 81-91% where 95% was stated.

With batch means (from 50 requests on) the interval's quantile is Student's t with k - 1 degrees of freedom instead
of the normal one: Wilson's interval on an effective size with the degrees of freedom of the variance estimate, as
Korn and Graubard (1998, "Confidence intervals for proportions with small expected number of positive counts
estimated from survey data", Survey Methodology 24) adjust it for correlated (clustered) samples.

The confidence is 95%, or for a point that ``--run-length decide`` stopped or ran to its cap, 1 - 0.05 / its
planned looks, the cap counted as one (rackbench.load.stopping.planned_looks). Coverage, measured by
benchmarks/interval_coverage.py (recordings cut into disjoint windows, each window's interval against the whole recording's
share): docs/statistics.md. Windows shorter than 120 s cover less than stated (swings longer than a tenth of the
window are invisible inside it); the decide rule's first look is at 120 s.
"""

from __future__ import annotations

from rackbench.core.format import number
from rackbench.core.stats import batch_size_in_time, effective_size, lag1, normal_quantile, t_quantile, wilson
from rackbench.load.records import Request
from rackbench.recipe.schema.sweep import SloTier
from rackbench.results.parts import SloTierResult

NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}


def tpot_ms(q: Request) -> float | None:
    """The request's time per output token after the first (None: fewer than two tokens, or no timing)."""
    if q.latency_ms is None or q.ttft_ms is None or (q.output_tokens or 0) < 2:
        return None
    return (q.latency_ms - q.ttft_ms) / (q.output_tokens - 1)


def good(q: Request, limits: dict[str, float]) -> bool:
    """Whether the request met every limit (a tier's ``SloTier.limits``, which builds them anew on each read: the
    caller reads them once for all its requests)."""
    return judge(limits)(q)


def judge(limits: dict[str, float]):
    """``good`` for one tier's limits, made once and asked of each request (the limits looked up once, not per
    request): a failed or unfinished request is not good; a missing TTFT misses a TTFT limit, and a TPOT limit
    unless the answer had fewer than two tokens (no later token to be late)."""
    unknown = set(limits) - set(NAMES)
    if unknown:
        raise KeyError(f"no such limit: {', '.join(sorted(unknown))} (the limits are {', '.join(NAMES)})")
    ttft, tpot, e2e = (limits.get(name) for name in NAMES)

    def met(q: Request) -> bool:
        if not q.ok or q.latency_ms is None or (e2e is not None and q.latency_ms > e2e):
            return False
        if ttft is not None and (q.ttft_ms is None or q.ttft_ms > ttft):
            return False
        if tpot is not None and (q.output_tokens or 0) >= 2:
            value = tpot_ms(q)                 # None only without a TTFT here
            return value is not None and not value > tpot
        return True
    return met


def batched(flags: list[bool], share: float, sent_s: list[float] | None = None) -> tuple[float, int] | None:
    """The effective size the batch means in time of a good/not-good sequence imply, and their count
    (rackbench.core.stats.batch_size_in_time)."""
    return batch_size_in_time(flags, share, share * (1 - share), sent_s)


def tier_result(name: str, tier: SloTier, requests: list[Request], window_s: float | None, gpus: int,
                gated: bool = False, confidence: float = 0.95) -> dict:
    """The tier at one point, from its profiled requests (in any order; judged in the order they were sent), its
    interval at ``confidence`` (two-sided)."""
    sent = sorted(requests, key=lambda q: (q.start_s is None, q.start_s or 0.0))
    flags = list(map(judge(tier.limits), sent))
    n, k = len(flags), sum(flags)
    share = k / n if n else None
    rho = lag1(flags)
    n_eff = effective_size(n, rho) if n else None
    times = [q.start_s for q in sent]
    by_batches = batched(flags, share, times if None not in times else None) if n else None
    upper = 1 - (1 - confidence) / 2
    z = normal_quantile(upper)
    if by_batches is not None:
        n_eff, z = min(n_eff, by_batches[0]), t_quantile(upper, by_batches[1] - 1)
    low, high = wilson(share, n_eff, z) if n else (None, None)
    verdict = None if share is None else ("met" if low >= tier.attainment else
                                          "missed" if high < tier.attainment else "unresolved")
    rate = window_s if window_s and window_s > 0 else None
    good_tokens = sum(q.output_tokens or 0.0 for q, f in zip(sent, flags) if f)
    return SloTierResult.model_validate({
        "tier": name, "gated": gated, "limits": tier.limits, "target": tier.attainment, "requests": n, "good": k,
        "attainment": share, "low": low, "high": high, "effective_n": n_eff, "lag1": rho,
        "batches": by_batches[1] if by_batches is not None else None, "confidence": confidence, "verdict": verdict,
        "goodput_rps": k / rate if rate else None,
        "good_output_tps_per_gpu": good_tokens / rate / gpus if rate and gpus else None}).model_dump(mode="json")


def tiers(slo: dict[str, SloTier], gated: str | None, requests: list[Request], window_s: float | None,
          gpus: int, looks: int = 1) -> list[dict]:
    """Every tier at one point; ``looks``: the looks a decide-stopped run planned, each judged at 1 - 0.05 / looks."""
    return [tier_result(name, tier, requests, window_s, gpus, gated=name == gated, confidence=1 - look_alpha(looks))
            for name, tier in slo.items()]


def relative_tier(tier: SloTier, relative, requests: list[Request]) -> tuple[SloTier, dict]:
    """A search tier whose limits are multiples (profile.search.relative) of the first probe's median TTFT and TPOT
    over its successful profiled ``requests``, its attainment target kept; with the reference it rests on. A TPOT of
    0 (every token of the answer in one streamed chunk, as a busy CPU server sends them) says nothing of the pace and
    is left out; where no request has one the TPOT limit is dropped, and the reference says so (``dropped``).
    ValueError when no limit is left to scale."""
    import numpy as np
    ok = [q for q in requests if q.ok]
    ttfts = [q.ttft_ms for q in ok if q.ttft_ms]
    tpots = [v for v in map(tpot_ms, ok) if v]
    ref = {"ttft_p50_ms": float(np.median(ttfts)) if ttfts else None,
           "tpot_p50_ms": float(np.median(tpots)) if tpots else None, "requests": len(ok), "dropped": []}
    limits = {}
    for key, multiple, base in (("ttft_ms", relative.ttft, ref["ttft_p50_ms"]),
                                ("tpot_ms", relative.tpot, ref["tpot_p50_ms"])):
        if multiple is None:
            continue
        if not base:
            ref["dropped"].append(f"{NAMES[key]}: none of the first probe's {len(ok)} successful requests has one "
                                  "above 0")
            continue
        limits[key] = round(multiple * base, 3)
    if not limits:
        raise ValueError(f"the first probe has no {' or '.join(NAMES[k] for k in ('ttft_ms', 'tpot_ms'))} to scale "
                         f"({len(ok)} successful requests): profile.search.relative needs one")
    return SloTier(**limits, attainment=tier.attainment), ref


def headline(tiers_: list[SloTierResult]) -> SloTierResult | None:
    """The tier a point is summed up by: the gated one, else the first defined."""
    return next((t for t in tiers_ if t.gated), tiers_[0] if tiers_ else None)


def limits_text(limits: dict[str, float]) -> str:
    return ", ".join(f"{NAMES[k]} <= {number(v, 'ms')} ms" for k, v in limits.items())


def describe(t: SloTierResult) -> str:
    """One line: the share good, its interval and what it rests on."""
    if t.attainment is None:
        return f"tier {t.tier} ({limits_text(t.limits)}): no profiled request to judge"
    rho = f", lag-1 {t.lag1:.2f}" if t.lag1 is not None else ""
    batches = f", {t.batches} batch means" if t.batches else ""
    return (f"tier {t.tier} ({limits_text(t.limits)}): {number(t.attainment, 'share')} of {t.requests:,} requests "
            f"good, {_level(t.confidence)} interval [{number(t.low, 'share')}, {number(t.high, 'share')}] (Wilson, "
            f"effective n {t.effective_n:.0f}{rho}{batches}) against the target {number(t.target, 'share')}")


def _level(confidence: float) -> str:
    return f"{100 * confidence:.3g}%"


def judged_at_look(name: str, tier: SloTier, requests: list[Request], looks: int, gpus: int = 1) -> SloTierResult:
    """The tier on the requests so far, at the confidence that ``looks`` planned looks leave each (Bonferroni:
    1 - 0.05 / looks, two-sided): what ``--run-length decide`` and benchmarks/replay_search.py judge a look by."""
    return SloTierResult.model_validate(tier_result(name, tier, requests, None, gpus,
                                                    confidence=1 - look_alpha(looks)))


def look_alpha(looks: int) -> float:
    """Each look's error rate when ``looks`` looks are planned: 0.05 over all of them (Bonferroni)."""
    return 0.05 / max(1, looks)


def decider(name: str, tier: SloTier, gpus: int):
    """``--run-length decide``'s verdict so far for one tier (rackbench.load.stopping.DecideController): the
    reason to stop once the tier is met or missed at its look's confidence (``judged_at_look``), else None."""

    def decide(requests: list[Request], looks: int) -> str | None:
        alpha = look_alpha(looks)
        got = judged_at_look(name, tier, requests, looks, gpus)
        if got.verdict not in ("met", "missed"):
            return None
        return (f"decided: tier {name} {got.verdict} at {got.requests:,} requests, {number(got.attainment, 'share')} "
                f"good, interval [{number(got.low, 'share')}, {number(got.high, 'share')}] at "
                f"{1 - alpha:.2%} (95% over {looks} planned looks, the cap included) against the target {number(got.target, 'share')}")
    return decide


def decider_for(profile, tier: str | None = None):
    """The ``decide`` a point of ``profile`` is measured with: its search's ``tier`` when given, else its gated tier
    (profile.gates.slo); None without either (``--run-length decide`` then runs the whole duration_s, saying so)."""
    name = tier or profile.spec.gates.slo
    return decider(name, profile.spec.slo[name], profile.topology.gpus) if name else None
