"""vLLM's Prometheus metrics: parsed with prometheus_client, reduced to the counters a result needs.

A :class:`Snapshot` is one scrape of one endpoint, summed over its engines (series that differ only in the
``engine`` label); ``after - before`` gives the deltas over a measured window.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

# result field -> (metric family as prometheus_client names it, sample name, label filter)
COUNTERS = {
    "prompt_tokens": ("vllm:prompt_tokens", "vllm:prompt_tokens_total", {}),
    "generation_tokens": ("vllm:generation_tokens", "vllm:generation_tokens_total", {}),
    "prefix_cache_queries": ("vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total", {}),
    "prefix_cache_hits": ("vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total", {}),
    "external_prefix_cache_queries": ("vllm:external_prefix_cache_queries",
                                      "vllm:external_prefix_cache_queries_total", {}),
    "external_prefix_cache_hits": ("vllm:external_prefix_cache_hits", "vllm:external_prefix_cache_hits_total", {}),
    "prompt_tokens_external": ("vllm:prompt_tokens_by_source", "vllm:prompt_tokens_by_source_total",
                               {"source": "external_kv_transfer"}),
    "prompt_tokens_local_cache_hit": ("vllm:prompt_tokens_by_source", "vllm:prompt_tokens_by_source_total",
                                      {"source": "local_cache_hit"}),
    "prompt_tokens_local_compute": ("vllm:prompt_tokens_by_source", "vllm:prompt_tokens_by_source_total",
                                    {"source": "local_compute"}),
    "preemptions": ("vllm:num_preemptions", "vllm:num_preemptions_total", {}),
    "requests_succeeded": ("vllm:request_success", "vllm:request_success_total", {}),
}
GAUGES = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
}
CACHE_CONFIG = "vllm:cache_config_info"     # an info gauge: the engine's KV cache in its labels


@dataclass(frozen=True)
class Snapshot:
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    prefix_cache_queries: float = 0.0
    prefix_cache_hits: float = 0.0
    external_prefix_cache_queries: float = 0.0
    external_prefix_cache_hits: float = 0.0
    prompt_tokens_external: float = 0.0
    prompt_tokens_local_cache_hit: float = 0.0
    prompt_tokens_local_compute: float = 0.0
    preemptions: float = 0.0
    requests_succeeded: float = 0.0
    running: float = 0.0
    waiting: float = 0.0
    kv_cache_usage: float = 0.0          # max over engines, 0..1
    engines: int = 0                     # distinct engine labels seen
    block_size: float = 0.0              # the engines' KV block size (vllm:cache_config_info; 0: not reported)
    cache_tokens: float = 0.0            # tokens the engines' GPU KV caches hold, summed (the same info gauge)

    def __sub__(self, before: "Snapshot") -> "Snapshot":
        """Counter deltas; gauges keep this (the later) snapshot's values."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in COUNTERS:
            out[name] = getattr(self, name) - getattr(before, name)
        return Snapshot(**out)

    def __add__(self, other: "Snapshot") -> "Snapshot":
        out = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        out["kv_cache_usage"] = max(self.kv_cache_usage, other.kv_cache_usage)
        out["block_size"] = max(self.block_size, other.block_size)
        return Snapshot(**out)

    @property
    def idle(self) -> bool:
        return self.running == 0 and self.waiting == 0

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


SAMPLES = frozenset([*(sample for _, sample, _ in COUNTERS.values()), *GAUGES.values(), CACHE_CONFIG])
FAMILIES = frozenset([*(fam for fam, _, _ in COUNTERS.values()), *GAUGES.values(), CACHE_CONFIG])


def _wanted(text: str) -> str:
    """The lines of the families a Snapshot reads (their # HELP / # TYPE lines and samples). A vLLM page is mostly
    histogram buckets; prometheus_client's pure-Python parser then reads ~10 lines instead of hundreds, once a
    second during every point."""
    keep = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) > 2 and parts[2].removesuffix("_total") in FAMILIES:
                keep.append(line)
        elif line.split("{", 1)[0].split(" ", 1)[0] in SAMPLES:
            keep.append(line)
    return "\n".join(keep) + "\n"


def _families(text: str):
    """prometheus_client's parse of a /metrics page, imported at the first page: the package loads every collector
    it has, which every pytest start paid when it was imported with this module (rackbench.server.deploy._http)."""
    from prometheus_client.parser import text_string_to_metric_families
    return text_string_to_metric_families(text)


def parse(text: str, model_name: str | None = None) -> Snapshot:
    """One scrape of a vLLM (or Dynamo worker) /metrics page. ``model_name`` filters by the model_name label."""
    values = {name: 0.0 for name in (*COUNTERS, *GAUGES)}
    kv_max = block = cache = 0.0
    engines: set[str] = set()
    for family in _families(_wanted(text)):
        for sample in family.samples:
            labels = sample.labels
            if family.name == CACHE_CONFIG:     # no model_name label: one per engine
                size = _number(labels.get("block_size"))
                block = max(block, size)
                cache += _number(labels.get("kv_cache_size_tokens")) or _number(labels.get("num_gpu_blocks")) * size
                continue
            if model_name and labels.get("model_name", model_name) != model_name:
                continue
            for field_name, (fam, sample_name, want) in COUNTERS.items():
                if family.name == fam and sample.name == sample_name and \
                        all(labels.get(k) == v for k, v in want.items()):
                    values[field_name] += sample.value
            for field_name, fam in GAUGES.items():
                if family.name == fam and sample.name == fam:
                    if field_name == "kv_cache_usage":
                        kv_max = max(kv_max, sample.value)
                    else:
                        values[field_name] += sample.value
                    if "engine" in labels:
                        engines.add(labels["engine"])
    values["kv_cache_usage"] = kv_max
    return Snapshot(**values, engines=len(engines), block_size=block, cache_tokens=cache)


def _number(label: str | None) -> float:
    try:
        return float(label) if label not in (None, "None") else 0.0
    except ValueError:
        return 0.0


def total(snapshots: list[Snapshot]) -> Snapshot:
    out = Snapshot()
    for snap in snapshots:
        out = out + snap
    return out


KV_EVENTS = "kv_cache_events_applied"   # Dynamo's KV router: events its indexer applied, by event_type and status


def kv_events(text: str) -> dict[str, float] | None:
    """The KV router's applied-event counters on a Dynamo frontend's /metrics page, summed over event types, by
    status (``ok``, ``block_not_found``, ...): the family whose name ends in ``kv_cache_events_applied``
    (``dynamo_component_`` or ``dynamo_kvrouter_`` as the release prefixes it). None where the page has none."""
    found: dict[str, float] | None = None
    for family in _families(text):
        if not family.name.removesuffix("_total").endswith(KV_EVENTS):     # _total: a page without TYPE lines
            continue
        found = found or {}
        for sample in family.samples:
            if sample.name in (family.name, f"{family.name}_total"):
                status = sample.labels.get("status", "ok")
                found[status] = found.get(status, 0.0) + sample.value
    return found
