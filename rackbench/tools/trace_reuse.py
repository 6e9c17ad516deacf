#!/usr/bin/env python3
"""What prefix reuse a replayed trace allows: the share of its prompt tokens an unbounded prefix cache could serve.

    python3 trace_reuse.py MODEL_DIR TRACE OUT [--trust-remote-code] [--transformers]

Each request of TRACE (AIPerf's ``mooncake_trace`` with ``messages``, as rackbench writes it) is rendered with the
model's own chat template and tokenized as the server does (the template's text, then its tokens without special
tokens added again). Its prompt is cut into full blocks; a block is reusable when the same chain of blocks (this
block and every one before it) occurred in any other request before, as vLLM's prefix cache keys them. With an
unbounded cache that is every block chain but its first occurrence, whatever the order the sessions interleave in,
so the share is (full-block tokens − distinct block chains × block size) / prompt tokens, per block size (the server
reports its own; rackbench picks that one). Written to OUT as JSON; a trace that cannot be read or a tokenizer that
does not load is written as ``error`` and the exit status is 0: this measures the trace, it never stops a point.

Runs in the client's step with the client's interpreter (transformers is AIPerf's own dependency), where the model
directory is; stand-alone on purpose: rackbench is not installed there. A model with a tokenizer.json and one chat
template is tokenized with ``tokenizers`` and ``jinja2`` alone (``--transformers`` forces transformers' path; both
give the same ids, tests/test_reuse.py checks it); any other through transformers.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

BLOCK_SIZES = (16, 32, 64, 128, 256)


def reuse(prompts, block_sizes=BLOCK_SIZES) -> dict:
    """``prompts``: each request's token ids. Per block size: the tokens an unbounded prefix cache could serve."""
    total = sum(len(p) for p in prompts)
    out = {}
    for size in block_sizes:
        seen, full = set(), 0
        for ids in prompts:
            chain = None
            for start in range(0, len(ids) - size + 1, size):
                chain = hash((chain, tuple(ids[start:start + size])))
                seen.add(chain)
                full += size
        reusable = full - len(seen) * size
        out[str(size)] = {"reusable_tokens": reusable, "share": reusable / total if total else None}
    return {"requests": len(prompts), "prompt_tokens": total,
            "prompt_tokens_mean": total / len(prompts) if prompts else None, "by_block_size": out}


def _special(value) -> str | None:
    return value.get("content") if isinstance(value, dict) else value


def light_prompts(model: Path, conversations: list) -> list | None:
    """The prompts' token ids through ``tokenizers`` and ``jinja2`` alone (a tenth of the time of importing
    transformers), where the model has a tokenizer.json and one chat template; None where it has not (a
    sentencepiece or remote-code tokenizer, several named templates): transformers then. The template is rendered as
    transformers renders it (a sandbox, trim_blocks and lstrip_blocks, the special tokens as variables)."""
    config = model / "tokenizer_config.json"
    cfg = json.loads(config.read_text()) if config.is_file() else {}
    template = cfg.get("chat_template")
    if template is None and (model / "chat_template.jinja").is_file():
        template = (model / "chat_template.jinja").read_text()
    if not isinstance(template, str) or not (model / "tokenizer.json").is_file():
        return None
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from tokenizers import Tokenizer
    except ImportError:
        return None

    def raise_exception(message):
        raise ValueError(message)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    render = env.from_string(template).render
    special = {k: _special(cfg.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    texts = [render(messages=m, add_generation_prompt=True, **special) for m in conversations]
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def transformers_prompts(model: Path, conversations: list, trust_remote_code: bool) -> list:
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(model), trust_remote_code=trust_remote_code)
    texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in conversations]
    return tok(texts, add_special_tokens=False)["input_ids"]


def _write(out: Path, body: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh, indent=1)
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    model, trace, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    started = time.monotonic()
    body = {"source": "rackbench/tools/trace_reuse.py: the trace's prompts through the model's chat template and "
                      "tokenizer; an unbounded prefix cache", "trace": str(trace), "tokenizer": str(model)}
    remote, heavy = "--trust-remote-code" in argv[3:], "--transformers" in argv[3:]
    try:
        conversations = [json.loads(line)["messages"] for line in trace.read_text().splitlines() if line.strip()]
        prompts = None if remote or heavy else light_prompts(model, conversations)
        body["tokenized_by"] = "tokenizers" if prompts is not None else "transformers"
        if prompts is None:
            prompts = transformers_prompts(model, conversations, remote)
        body.update(reuse(prompts))
    except Exception as err:          # noqa: BLE001 - written down, never raised: the point goes on without it
        body["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:500]
    body["seconds"] = round(time.monotonic() - started, 2)
    _write(out, body)
    print(f"trace reuse: {body.get('error') or {k: v['share'] for k, v in body['by_block_size'].items()}}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
