"""Generate the suite's own models: a byte-level BPE tokenizer trained on local text and a random-weight
Llama-style model (or a Mixtral-style MoE with ``--experts``) of a given size, deterministic by seed. Nothing is
downloaded.

Runs inside the serving venv (it needs torch, transformers and tokenizers), as a script:
``python tiny_gen.py OUT_DIR --seed 0``. It imports nothing from rackbench, so the serving venv need not have
rackbench installed. The caller (rackbench.server.generated) caches OUT_DIR by a hash of this file and its arguments.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def corpus(limit_bytes: int) -> list[str]:
    """Python's own standard library sources, in a fixed order, up to ``limit_bytes``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= limit_bytes:
            break
    return texts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--max-positions", type=int, default=8192)
    ap.add_argument("--intermediate", type=int, default=None, help="MLP width (default 2 x hidden)")
    ap.add_argument("--experts", type=int, default=0, help="> 0: a Mixtral-style MoE with this many experts")
    ap.add_argument("--top-k", type=int, default=2, help="experts per token (with --experts)")
    ap.add_argument("--corpus-bytes", type=int, default=8_000_000)
    args = ap.parse_args()

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM,
                              PreTrainedTokenizerFast)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(args.corpus_bytes), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>", additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    fast.chat_template = CHAT_TEMPLATE

    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    torch.manual_seed(args.seed)
    shape = dict(
        vocab_size=tok.get_vocab_size(), hidden_size=args.hidden, intermediate_size=args.intermediate or 2 * args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.hidden // args.heads, max_position_embeddings=args.max_positions, tie_word_embeddings=True,
        bos_token_id=ids["<|bos|>"], eos_token_id=[ids["<|eos|>"], ids["<|im_end|>"]],
        pad_token_id=ids["<|pad|>"], torch_dtype="bfloat16")
    if args.experts:
        config = MixtralConfig(**shape, num_local_experts=args.experts, num_experts_per_tok=args.top_k)
        model = MixtralForCausalLM(config).to(torch.bfloat16)
    else:
        config = LlamaConfig(**shape)
        model = LlamaForCausalLM(config).to(torch.bfloat16)

    # Checks before anything is written: round trip, chat template, one forward pass.
    sample = "def add(a, b):\n    return a + b  # ünïcode ✓\n"
    assert fast.decode(fast.encode(sample)) == sample, "tokenizer round trip failed"
    chat = fast.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                    add_generation_prompt=True)
    assert chat.endswith("<|im_start|>assistant\n"), chat
    with torch.no_grad():
        logits = model(torch.tensor([fast.encode(sample)])).logits
    assert logits.shape[-1] == config.vocab_size and torch.isfinite(logits).all()

    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / "rackbench-model.json").write_text(json.dumps(
        {"seed": args.seed, "parameters": sum(p.numel() for p in model.parameters()), **vars(args) | {"out": None}},
        indent=1, default=str))
    tmp.rename(args.out)


if __name__ == "__main__":
    main()
