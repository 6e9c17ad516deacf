"""What prefix reuse a point's trace allows against what its server reused (#33 item 1), from the point's
``trace-reuse.json`` (rackbench/tools/trace_reuse.py, written in the client's step) and its server counters.

**Allowed**: the share of the trace's prompt tokens an unbounded prefix cache could serve, at the server's own block
size (``vllm:cache_config_info``; 16, vLLM's default on GPUs, where the server does not say). **Measured**: the
window's prompt tokens served from the GPU prefix cache or the CPU tier (``prompt_tokens_by_source``). **Should hold**:
the cache holds the live sessions' prefixes: concurrency x the trace's mean prompt tokens (every live session keeps its
growing prefix between turns) is at most the GPU cache's tokens (the engines' own report, else the capacity model)
plus, on an offload arm, the CPU tier's. Where it should hold and the server reused far less than the trace allows
(:data:`GAP` less, and under :data:`LOW` of it, over :data:`REQUESTS` requests per live session at least), the bytes
the server saw were not the trace's from turn to turn (a client re-rendering a turn's history, the InferenceX AgentX
finding), or prefix caching was off; where it cannot hold, the gap is the cache's size.

**Warm**: no cold cache serves more than the trace allows (every request of the window is in the trace, and an
unbounded cache filled by the trace alone is the most any cache can hold of it), so a measured share above the
allowed one by more than :data:`WARM` plus the warm-up's share of the window's requests means hits on prefixes
cached before the window (vLLM warns of the same, vllm#53920): an earlier point on the same server replaying the
same prompts, a trace without the keyspace marker rackbench's generated traces carry, or a client that sent more
requests than the trace holds and replayed it (``trace_requests``; AIPerf ends a fixed point when its trace runs out,
a site's generator may start the trace again). The margin covers the warm-up:
one request per live session before the window, whose prompts the window may send again or extend. Judged with at
least :data:`REQUESTS` requests per live session, as the gap is."""

from __future__ import annotations

from pathlib import Path

from rackbench.catalog.capacity import estimate
from rackbench.core.files import read_json
from rackbench.recipe.profile import Profile

GAP = 0.2                # a finding where a cache that should hold the sessions reused this much less than allowed,
LOW = 0.5                # ... and less than this share of it,
REQUESTS = 10            # ... over at least this many requests per live session (a short window holds mostly first
                         # turns, which no cache can serve)
WARM = 0.05              # measured above allowed by more than this: the cache was warm at the window's start
DEFAULT_BLOCK = 16       # vLLM's block size on GPUs where the server reports none


def read(path: Path) -> dict | None:
    """The tool's JSON; None where the point wrote none (a dataset that is not a trace file, an older run); a file
    that cannot be read is the part's error, said in the result rather than dropped."""
    if not Path(path).exists():
        return None
    try:
        return read_json(path)
    except ValueError as err:
        return {"error": str(err)}


def cache_tokens(profile: Profile, reported: float | None) -> float | None:
    """Tokens the point's KV caches hold: the engines' own report of their GPU caches, else the capacity model's,
    plus the CPU tier's on an offload arm."""
    try:
        est = estimate(profile)
    except Exception:            # noqa: BLE001 - a profile the capacity model cannot size: the report alone
        est = None
    gpu = reported or (est.kv_tokens * profile.topology.engines if est else None)
    if gpu is None:
        return None
    cpu = 0.0
    if profile.offload and est and est.kv_bytes_per_token:
        cpu = est.dram_pool_per_node * profile.topology.nodes / (est.kv_bytes_per_token * profile.topology.tp)
    return gpu + cpu


def block(tool: dict | None, server, concurrency: int, profile: Profile, requests: int | None = None) -> dict | None:
    """The result's ``reuse`` part, or None without the tool's file. ``requests``: the window's; with fewer than
    :data:`REQUESTS` per live session ``warm`` is not judged, and the warm-up's share of them (one request per live
    session, which the window may send again) widens its margin."""
    if tool is None:
        return None
    size = int(server.block_size) if server is not None and server.block_size else DEFAULT_BLOCK
    out = {"source": "rackbench/tools/trace_reuse.py over the point's trace; the server's prompt_tokens_by_source",
           "block_size": size, "allowed_share": None, "measured_share": None, "gap": None,
           "prompt_tokens_mean": tool.get("prompt_tokens_mean"), "trace_requests": tool.get("requests"),
           "working_set_tokens": None, "cache_tokens": None,
           "should_hold": None, "warm": None, "error": tool.get("error")}
    allowed = (tool.get("by_block_size") or {}).get(str(size), {}).get("share")
    if allowed is None and out["error"] is None:
        out["error"] = f"the tool measured no block size {size} (the server's)"
    shares = server.prompt_token_shares if server is not None else None
    measured = None if shares is None or shares.local_cache is None else shares.local_cache + (shares.cpu_tier or 0.0)
    cache = cache_tokens(profile, server.cache_tokens if server is not None else None)
    mean = out["prompt_tokens_mean"]
    working = concurrency * mean if mean else None
    out.update({"allowed_share": allowed, "measured_share": measured, "cache_tokens": cache,
                "gap": allowed - measured if allowed is not None and measured is not None else None,
                "warm": warm(allowed, measured, concurrency, requests),
                "working_set_tokens": working,
                "should_hold": working <= cache if working is not None and cache is not None else None})
    return out


def warm(allowed: float | None, measured: float | None, concurrency: int, requests: int | None) -> bool | None:
    """Whether the server served more than a cold cache could (module docstring); None where it cannot be told."""
    if allowed is None or measured is None or (requests is not None and requests < REQUESTS * concurrency):
        return None
    return measured - allowed > WARM + (concurrency / requests if requests else 0.0)
