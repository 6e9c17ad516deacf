"""Whether the point's result is a measurement at all: its file matches the schema, its servers lived through it,
its requests succeeded and were all recorded, and the server's own counters add up."""

from __future__ import annotations

from rackbench.core.format import number
from rackbench.results.checks.base import Judged, count, made
from rackbench.results.model import Check

COUNTER_TOLERANCE = 0.01


def schema(p: Judged) -> Check:
    """The result file matches schemas/result.schema.json (what consumers of the file rely on)."""
    return made("schema", not p.schema_errors, "the result file matches schemas/result.schema.json",
                "result file does not match schemas/result.schema.json:\n  " + "\n  ".join(p.schema_errors))


def servers(p: Judged) -> Check | None:
    """No server died and the session was not interrupted during the point (recorded only when it happened)."""
    run = p.result.run
    if not (run.server_died or run.interrupted):
        return None
    return Check(name="servers", ok=False, message=(
        f"the server died during the point: {run.server_died} (its log tail is in the report below; every "
        "server log is kept in the case's server-logs/)" if run.server_died else
        f"the session was interrupted during the point ({run.stopped_by}): not a measurement"))


def successful(p: Judged) -> Check:
    """At least one request succeeded; otherwise what the load generator completed and whether it wrote a summary."""
    req, run = p.result.requests, p.result.run
    why = (f"0 successful requests of {count(req.completed)} completed" if req.completed
           else f"{run.generator} completed no request")
    if not run.summary_present:
        why += f" and {run.generator} wrote no summary (exit code {run.exit_code}; see {run.artifact_dir}/logs)"
    return made("successful", bool(req.successful),
                f"{count(req.successful)} successful requests of {count(req.completed)} completed", why)


def records(p: Judged) -> Check | None:
    """The load generator's per-request export holds every request its summary counts (not cut short by a full or
    failing disk)."""
    req, run = p.result.requests, p.result.run
    if not req.cut_short:
        return None
    return Check(name="records", ok=False, message=(
        f"{run.generator}'s per-request export holds {count(req.recorded)} of the {count(req.completed)} "
        f"requests its summary counts (cut short: a full or failing disk?): the requests' latencies and the "
        f"history's rows are not the point's (its files: {run.artifact_dir})"))


def counters(p: Judged) -> Check | None:
    """The server's prompt tokens by where their KV came from (computed, GPU prefix cache, CPU tier: vLLM's
    prompt_tokens_by_source) add up to its prompt tokens over the window, within 1% (#33). They do exactly on every
    recorded point; a server whose counters do not cannot say what share the CPU tier served. None where the server
    has no per-source counter (older vLLM) or no counters were read."""
    s = p.result.server
    if s is None:
        return None
    parts = (s.prompt_tokens_local_compute, s.prompt_tokens_local_cache_hit, s.prompt_tokens_external)
    total = sum(parts)
    if total == 0:
        return None
    off = abs(total - s.prompt_tokens) / max(s.prompt_tokens, 1.0)
    said = (f"prompt tokens by source (computed {count(parts[0])} + GPU prefix cache {count(parts[1])} + CPU tier "
            f"{count(parts[2])} = {count(total)}) against the server's prompt tokens {count(s.prompt_tokens)}")
    return made("counters", off <= COUNTER_TOLERANCE, f"{said}: they add up",
                f"{said}: off by {number(off, 'share')} (> {number(COUNTER_TOLERANCE, 'share')}): the shares of "
                "where the window's KV came from do not describe it (a counter reset, or another server's "
                "counters in the scrape)")
