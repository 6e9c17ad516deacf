"""Whether a KV-aware router knew the workers' caches during a point (#33 item 3).

Dynamo's KV router (``router-mode: kv``) routes a request to the worker whose cache holds most of its prefix, as the
KV events the workers publish tell its indexer. A router that applied no event over the run routed without knowing
any cache (workers that publish nothing, a subscriber on the wrong endpoint), so it measured another router than
the one configured: Dynamo's KV-router A/B guide voids a comparison then. The evidence is the frontend's own
``kv_cache_events_applied`` counter, read before and after the run (rackbench.server.counters.kv_events); events the
indexer could not apply (``block_not_found`` and any status but ``ok``) are said beside it.
"""

from __future__ import annotations

from rackbench.core.format import number
from rackbench.results.model import Check, PointResult


def applied(result: PointResult) -> float | None:
    """KV events the router applied over the run (None: no KV-aware router, or no counter to read)."""
    ev = result.run.kv_events
    return None if ev is None else ev.get("ok", 0.0)


def check(result: PointResult) -> Check | None:
    """A point behind a KV-aware router passes when its router applied KV events over the run."""
    ev = result.run.kv_events
    if ev is None:
        return None
    ok = applied(result) or 0.0
    failed = {k: v for k, v in ev.items() if k != "ok" and v}
    said = f"the KV router applied {number(ok, 'count')} KV events over the run" + (
        "; not applied: " + ", ".join(f"{number(v, 'count')} {k}" for k, v in sorted(failed.items())) if failed else "")
    if ok > 0:
        return Check(name="kv-events", ok=True, message=said)
    return Check(name="kv-events", ok=False, message=(
        f"{said}: it routed without knowing any worker's cache, so the point measured another router than "
        "router-mode: kv. Check that the workers publish KV events (backend.kv_events_config, or the frontend's "
        "router-kv-events) and that nothing between them and the frontend drops them (their logs)"))
