"""The offload A/B: each CPU-offload arm against the base arm it differs from in the offload alone (same model,
cluster, layout, frontend, server versions and load), at the concurrencies both measured. report.md, the A/B
plots and report.html all pair arms here."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rackbench.results import routing
from rackbench.server import frontends
from rackbench.results.model import PointResult


@dataclass(frozen=True)
class Pair:
    base: str                 # profile ids
    offload: str
    shared: tuple[int, ...]   # concurrencies both arms measured
    differs: tuple[str, ...] = ()   # what makes the arms no A/B of the offload alone (then no ratio is shown)
    void: tuple[str, ...] = ()      # points of either arm that measured no valid A/B, and why (no ratio either)


def frontend(r: PointResult) -> str:
    """What served the point (results before schema 3 did not say: Dynamo reports its version, vLLM alone not; a
    reading of old files, not a frontend's behaviour)."""
    return r.identity.frontend or ("dynamo" if r.identity.versions.get("dynamo") else "vllm")


def family(r: PointResult) -> tuple:
    """What makes two arms candidates for an A/B at all: the same model, cluster and frontend."""
    return r.identity.model, r.identity.cluster, frontend(r)


def arm_traits(r: PointResult) -> dict[str, object]:
    """Everything else two arms must share to be an A/B of the offload alone, by what a mismatch is called."""
    i = r.identity
    return {"layout": tuple(sorted(i.layout.model_dump().items())),
            "server versions": tuple(sorted((k, v) for k, v in i.versions.items()
                                            if k in frontends.every_component())),
            "load (its trace: sessions, seed, shape)": i.load_fingerprint or i.dataset,
            "Ready workers at the point's start": r.run.ready_workers}


def void(r: PointResult) -> list[str]:
    """Why a point measured no valid A/B whatever its partner: it started on a warm prefix cache
    (rackbench.results.reuse), or its KV-aware router applied no KV event (rackbench.results.routing)."""
    out = [f"{r.identity.case_id} started on a warm prefix cache"] if r.reuse is not None and r.reuse.warm else []
    if routing.applied(r) == 0:
        out.append(f"{r.identity.case_id}'s KV router applied no KV event")
    return out


def pairs(points: list[PointResult]) -> list[Pair]:
    """Each offload arm with each base arm of its family; a pair whose arms differ in more than the offload says
    in what (its ``differs``), and one with a point that measured no valid A/B says why (its ``void``); either gets
    no ratio."""
    arms: dict[tuple, dict[bool, dict[str, list[PointResult]]]] = defaultdict(
        lambda: {True: defaultdict(list), False: defaultdict(list)})
    for r in points:
        arms[family(r)][r.identity.offload.enabled][r.identity.profile].append(r)
    out = []
    for arm in arms.values():
        for off, off_r in arm[True].items():
            for base, base_r in arm[False].items():
                differs = tuple(sorted({name for a in off_r for b in base_r
                                        for name, value in arm_traits(a).items() if arm_traits(b)[name] != value}))
                shared = {r.identity.concurrency for r in off_r} & {r.identity.concurrency for r in base_r}
                bad = tuple(sorted(why for r in (*base_r, *off_r) for why in void(r)))
                out.append(Pair(base, off, () if differs or bad else tuple(sorted(shared)), differs, bad))
    return sorted(out, key=lambda p: (p.offload, p.base))


def cpu_share(r: PointResult) -> float | None:
    return r.server.prompt_token_shares.cpu_tier if r.server is not None else None


def local_share(r: PointResult) -> float | None:
    return r.server.prompt_token_shares.local_cache if r.server is not None else None


def rows(points: list[PointResult], pair: Pair) -> list[dict]:
    """One row per shared concurrency: both arms' throughput per GPU, their ratio, TTFT, cache shares."""
    idx = {(r.identity.profile, r.identity.concurrency): r for r in points}
    out = []
    for c in pair.shared:
        b, o = idx[(pair.base, c)], idx[(pair.offload, c)]
        tb, to = b.throughput.output_tps_per_gpu, o.throughput.output_tps_per_gpu
        out.append({"concurrency": c, "base_tps_gpu": tb, "offload_tps_gpu": to,
                    "ratio": to / tb if tb and to is not None else None,
                    "base_ttft_p50": b.latency_ms.ttft.p50, "offload_ttft_p50": o.latency_ms.ttft.p50,
                    "base_local_cache": local_share(b), "offload_local_cache": local_share(o),
                    "cpu_tier": cpu_share(o)})
    return out
