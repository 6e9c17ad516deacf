"""vLLM's own rules across its flags, which its argument parser does not check and its engine refuses at start-up,
after the allocation: ``SchedulerConfig.verify_max_model_len`` (max_num_batched_tokens against max_num_seqs and
max_model_len, max_num_active_seqs, long_prefill_token_threshold). The values an unset flag takes are vLLM's own
defaults for the cluster's device (``EngineArgs.get_batch_defaults``: by the GPU's memory, per CPU world size), so
``max-num-seqs: 4096`` alone is caught where vLLM's default of 2048 batched tokens would refuse it. Part of
:data:`rackbench.catalog.rules.RULES`; each message is the engine's own.
"""

from __future__ import annotations

from typing import Iterator

from rackbench.core.errors import Problem
from rackbench.recipe.profile import Profile


def batch_defaults(p: Profile) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, where they come from) that vLLM's OpenAI server takes when a recipe
    sets neither, on this cluster's device (vLLM 0.2x-0.3x, ``EngineArgs.get_batch_defaults``)."""
    world = p.flags.tp * p.flags.pp
    hbm, gpu = p.cluster.hbm_gib_per_gpu, p.cluster.gpu_type
    if gpu == "cpu":
        batched, seqs, why = 2048 * world, 128 * world, f"vLLM's CPU default for a world of {world}"
    elif hbm >= 160:
        batched, seqs, why = 16384, 1024, f"vLLM's default on a GPU of {hbm:g} GiB (>= 160)"
    elif hbm >= 70 and "a100" not in gpu:
        batched, seqs, why = 8192, 1024, f"vLLM's default on a GPU of {hbm:g} GiB (>= 70)"
    else:
        batched, seqs, why = 2048, 256, f"vLLM's default on a GPU of {hbm:g} GiB"
    if p.flags.value("performance-mode") == "throughput":
        batched, seqs, why = batched * 2, seqs * 2, why + ", doubled by performance-mode: throughput"
    return batched, seqs, why


def _int(value) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def scheduler_limits(p: Profile) -> Iterator[Problem]:
    """Catches what vLLM's scheduler refuses at start-up: max_num_batched_tokens below max_num_seqs (`max-num-seqs:
    4096` with the default 2048 batched tokens), below max_model_len with chunked prefill off, max_num_active_seqs
    above max_num_seqs, long_prefill_token_threshold above max_model_len."""
    if p.flags.errors:
        return                   # flag-values reports a flag it cannot read
    f = p.flags
    d_batched, d_seqs, why = batch_defaults(p)
    chunked = not (f.on("no-enable-chunked-prefill") or f.value("enable-chunked-prefill") is False)
    native = int(p.model.native_max_context.value) if p.model is not None else None
    model_len = f.max_model_len or native
    batched = f.max_num_batched_tokens
    if batched is None:
        batched = d_batched if chunked or model_len is None else max(model_len, d_batched)
        said_batched = f"max-num-batched-tokens unset: {batched} ({why})"
    else:
        said_batched = f"max-num-batched-tokens {batched}"
    seqs = f.max_num_seqs if f.max_num_seqs is not None else d_seqs
    said_seqs = f"max-num-seqs {seqs}" if f.max_num_seqs is not None else f"max-num-seqs unset: {seqs} ({why})"
    where = p.flag_path("max-num-batched-tokens" if f.max_num_batched_tokens is not None else "max-num-seqs")
    if model_len is not None and batched < model_len and not chunked:
        yield p.recipe_problem(
            where, f"vLLM refuses to start: max_num_batched_tokens ({batched}) is smaller than max_model_len "
            f"({model_len}) with chunked prefill off ({said_batched})",
            f"set max-num-batched-tokens to at least {model_len}, lower max-model-len, or enable chunked prefill")
    if batched < seqs:
        yield p.recipe_problem(
            where, f"vLLM refuses to start: max_num_batched_tokens ({batched}) must be greater than or equal to "
            f"max_num_seqs ({seqs}) ({said_batched}; {said_seqs})",
            f"set max-num-batched-tokens to at least {seqs}, or max-num-seqs to at most {batched}")
    active = _int(f.value("max-num-active-seqs"))
    if active is not None and active > seqs:
        yield p.recipe_problem(
            p.flag_path("max-num-active-seqs"), f"vLLM refuses to start: max_num_active_seqs ({active}) cannot be "
            f"greater than max_num_seqs ({seqs}) ({said_seqs})", f"set max-num-active-seqs to at most {seqs}")
    threshold = _int(f.value("long-prefill-token-threshold"))
    if threshold is not None and model_len is not None and threshold > model_len:
        yield p.recipe_problem(
            p.flag_path("long-prefill-token-threshold"), f"vLLM refuses to start: long_prefill_token_threshold "
            f"({threshold}) cannot be greater than the max_model_len ({model_len})",
            f"set long-prefill-token-threshold to at most {model_len}")
