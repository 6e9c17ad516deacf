"""Whether the point measured its own, whole deployment: the output tokens its client received are its server's
own count, every serving instance was ready, and a KV-aware router knew the workers' caches."""

from __future__ import annotations

from rackbench.core.format import number
from rackbench.results import routing
from rackbench.results.checks.base import Judged, count, made, pct
from rackbench.results.model import Check


def own_server(p: Judged) -> Check:
    """The point measured its own server: the output tokens its load generator received are the server's own
    counters' within profile.gates.token_ratio_tolerance. With the server's own token counts (AIPerf's
    --use-server-token-count) both count the same tokens; a server that counted none of them answered someone else
    (another session's server on the same port), and a ratio of 0.5 is one server shared by two clients."""
    result, tolerance = p.result, p.gates.token_ratio_tolerance
    ratio, gen = result.output_token_ratio, result.run.generator
    if not result.requests.successful:
        return Check(name="own_server", ok=True, message="no successful request to account for")
    if result.server is None:
        return Check(name="own_server", ok=False, message=(
            "the server's counters could not be read around the point: nothing shows that its own server answered "
            f"{gen}'s requests (docs/clusters.md#ports-addresses-and-whose-server-a-point-measured)"))
    if ratio is None and (result.server.generation_tokens or 0) > 0:
        return Check(name="own_server", ok=True, message=(
            f"not cross-checked: {gen} reported no output tokens per request (the server counted "
            f"{count(result.server.generation_tokens)}); where the nodes are this machine, the process answering was "
            "checked before the load"))
    if ratio is None:
        return Check(name="own_server", ok=False, message=(
            f"the server counted no output tokens during the point while {gen} received "
            f"{count(result.requests.successful)} successful requests: another server answered them"))
    said = f"{gen}'s output tokens are {number(ratio, 'ratio')} the server's own count"
    return made("own_server", abs(ratio - 1) <= tolerance, f"{said} (1 within {pct(tolerance)})",
                  f"{said}, beyond 1 ± {pct(tolerance)}: " + (
                      "the server generated tokens no request of this point received (another client on the same "
                      "server)" if ratio < 1 else "the client counted tokens the server never generated") +
                  " (profile.gates.token_ratio_tolerance)")


def workers(p: Judged) -> Check | None:
    """Every serving instance the deployment came up with was ready at the point's start (a worker lost since then
    leaves the point measuring fewer than its layout)."""
    run = p.result.run
    if run.ready_workers is None or not run.expected_workers or run.ready_workers >= run.expected_workers:
        return None
    return Check(name="workers", ok=False, message=(
        f"{run.ready_workers} of the {run.expected_workers} serving instances ready at the point's start: a "
        "worker was lost since the deployment came up, and the point measured fewer than its layout (its log "
        "is in the profile's logs folder)"))


def kv_events(p: Judged) -> Check | None:
    """A point behind a KV-aware router (router-mode: kv) passes when its router applied KV events over the run
    (rackbench.results.routing)."""
    return routing.check(p.result)
