"""What a point's tokens cost in GPU energy and, where the cluster file names a price, in money.

Energy: the GPUs' board power (nvidia-smi ``power.draw``, sampled every second on each host during the run),
summed over the measured window (the first profiled request sent to the last answered): each sample inside it
counts for one sampling interval. Board power only: the CPUs, host memory, network, storage and cooling are not in
it. Cost (InferenceX's formula): price per GPU-hour x GPUs x 1e6 / (3600 x tok/s) per million tokens, from the
cluster's ``cost.gpu_hour``; no price is ever assumed.
"""

from __future__ import annotations

BASIS = ("GPU board power (nvidia-smi power.draw), 1 s samples summed over the measured window; CPUs, memory, "
         "network and cooling not included")


def window_energy(power: list[tuple[float, str, float]], start: float, end: float, interval_s: float
                  ) -> tuple[float | None, int]:
    """Joules of every GPU over [start, end] (wall clock), and how many GPUs were sampled there (pure)."""
    inside = [(uuid, watts) for t, uuid, watts in power if start <= t <= end]
    gpus = {uuid for uuid, _ in inside}
    if not gpus:
        return None, 0
    return sum(watts for _, watts in inside) * interval_s, len(gpus)


def block(power: list[tuple[float, str, float]], interval_s: float, window: tuple[float, float] | None,
          output_tokens: float | None, output_tps: float | None, total_tps: float | None, gpus: int,
          cost=None) -> dict | None:
    """The result's ``economics``: energy per token over the measured window and cost per million tokens (either
    may be absent: no GPU samples, no price). None when there is neither."""
    energy, sampled = (window_energy(power, *window, interval_s) if power and window else (None, 0))
    span = (window[1] - window[0]) if window else None
    per_m = (lambda tps: cost.gpu_hour * gpus * 1e6 / (3600 * tps) if cost is not None and tps else None)
    if energy is None and cost is None:
        return None
    return {
        "window_s": span, "gpus_sampled": sampled, "energy_j": energy,
        "mean_power_w": energy / span if energy is not None and span else None,
        "joules_per_output_token": energy / output_tokens if energy is not None and output_tokens else None,
        "output_tokens_per_joule": output_tokens / energy if energy and output_tokens else None,
        "energy_basis": BASIS if energy is not None else "no GPU power samples in the measured window",
        "gpu_hour_price": cost.gpu_hour if cost is not None else None,
        "currency": cost.currency if cost is not None else None,
        "cost_per_m_output_tokens": per_m(output_tps), "cost_per_m_total_tokens": per_m(total_tps)}
