"""Reading vLLM CLI flags as a recipe writes them (``vllm_config.aggregated``: flag -> value)."""

from __future__ import annotations

from typing import Any

# Flags whose value is a JSON object on the command line.
JSON_FLAGS = frozenset({
    "speculative-config", "kv-transfer-config", "compilation-config", "attention-config",
    "kernel-config", "hf-overrides", "kv-events-config", "override-generation-config",
    "model-loader-extra-config", "limit-mm-per-prompt", "additional-config",
    "structured-outputs-config", "ec-transfer-config", "mm-processor-kwargs", "override-pooler-config",
})


def canonical(name: str) -> str:
    return name.lstrip("-").replace("_", "-")


class Flags:
    """A read-only view of one worker's vLLM flags, tolerant of ``-``/``_`` spelling."""

    def __init__(self, flags: dict[str, Any] | None):
        self.raw = dict(flags or {})
        self._by_canonical = {canonical(k): k for k in self.raw}

    def key(self, name: str) -> str | None:
        return self._by_canonical.get(canonical(name))

    def get(self, name: str, default: Any = None) -> Any:
        key = self.key(name)
        return self.raw[key] if key is not None else default

    def has(self, name: str) -> bool:
        """Whether the flag is passed (a null value means it is not: cli_args drops it)."""
        key = self.key(name)
        return key is not None and self.raw[key] is not None

    def on(self, name: str) -> bool:
        value = self.get(name)
        return value is True or (isinstance(value, str) and value.lower() in ("true", "1", ""))
