"""The offload A/B: each CPU-offload arm against the base arm it differs from in the offload alone (same model,
cluster, layout, frontend, server versions and load), at the concurrencies both measured. report.md, the A/B
plots and report.html all pair arms here."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from servebench.server import frontends
from servebench.results.model import PointResult


@dataclass(frozen=True)
class Pair:
    base: str                 # profile ids
    offload: str
    shared: tuple[int, ...]   # concurrencies both arms measured


def frontend(r: PointResult) -> str:
    """What served the point (results before schema 3 did not say: Dynamo reports its version, vLLM alone not; a
    reading of old files, not a frontend's behaviour)."""
    return r.identity.frontend or ("dynamo" if r.identity.versions.get("dynamo") else "vllm")


def arm_key(r: PointResult) -> tuple:
    """Everything two arms must share to be an A/B of the offload alone."""
    i = r.identity
    servers = tuple(sorted((k, v) for k, v in i.versions.items() if k in frontends.every_component()))
    load = i.load_fingerprint or i.dataset
    return (i.model, i.cluster, tuple(sorted(i.layout.model_dump().items())), frontend(r), servers, load)


def pairs(points: list[PointResult]) -> list[Pair]:
    arms: dict[tuple, dict[bool, dict[str, set[int]]]] = defaultdict(lambda: {True: defaultdict(set),
                                                                               False: defaultdict(set)})
    for r in points:
        arms[arm_key(r)][r.identity.offload.enabled][r.identity.profile].add(r.identity.concurrency)
    out = []
    for arm in arms.values():
        for off, off_c in arm[True].items():
            for base, base_c in arm[False].items():
                out.append(Pair(base, off, tuple(sorted(off_c & base_c))))
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
