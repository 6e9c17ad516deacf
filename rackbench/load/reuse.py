"""What prefix reuse a point's trace allows (#33): rackbench/tools/trace_reuse.py as a step of the client's preamble,
for every load generator that replays a trace file, where the client runs and sees the model's tokenizer. It writes
the point's ``trace-reuse.json`` (CaseFolder.trace_reuse) and never stops the point: a tokenizer that does not load is
written down as an error and the load goes on."""

from __future__ import annotations

import dataclasses

from rackbench.load.generator import Invocation, LoadJob
from rackbench.tools import TRACE_REUSE, in_folder


def step(job: LoadJob) -> dict | None:
    """The preamble step, or None where there is nothing to tokenize with (no trace file, no model directory)."""
    c = job.client
    if job.trace is None or not c.model:
        return None
    argv = [c.python, in_folder(c.tools, TRACE_REUSE), c.model, str(job.trace), str(job.case.trace_reuse)]
    if job.point.profile.spec.load.tokenizer_trust_remote_code:
        argv.append("--trust-remote-code")
    return {"name": "trace-reuse", "argv": argv}


def with_step(job: LoadJob, inv: Invocation) -> Invocation:
    """``inv`` with the trace-reuse step after the generator's own preparation (the tokenizer copy)."""
    extra = step(job)
    return inv if extra is None else dataclasses.replace(inv, steps=(*inv.steps, extra))
