"""Deterministic agentic-coding sessions in AIPerf's ``mooncake_trace`` form (recorded messages per turn).

A session is what a coding agent sends: a long system prompt (tools, repository context), then turns whose
message array grows by the previous (recorded) assistant reply, a tool result and a new instruction, so every
turn shares a growing prefix with the one before. Between turns the agent "thinks" (``delay`` ms after the
previous response). Some sessions spawn a subagent: a shorter session that reuses the parent's system prompt.

Every prompt starts with a *keyspace marker* (the point's case id and run id), so a point never rides on the
prefix cache another point filled on the same server.

Output lines: ``{"session_id", "messages", "delay", "output_length"}`` (first turn without ``delay``).
Same parameters + seed = byte-identical file.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path

from rackbench.core.former_name import FORMER

_SYLLABLES = ("ka", "to", "ri", "mon", "sel", "var", "dex", "pul", "fin", "gor", "la", "te", "zen", "qua", "bri",
              "nod", "cal", "vex", "tur", "mi", "sor", "pen", "lux", "har", "do", "ne", "wil", "gra", "spo", "tik")
_CODE = ("def", "return", "self", "import", "class", "if", "else", "for", "in", "None", "True", "path", "config",
         "value", "result", "test", "error", "args", "data", "file", "line", "index", "items", "key", "name")


@dataclass(frozen=True)
class TraceSpec:
    sessions: int
    turns: int = 4                 # mean turns of a top-level session (uniform in [turns-1, turns+1], >= 2)
    system_words: int = 300        # shared prefix of every turn of a session
    user_words: int = 40           # new instruction per turn
    tool_words: int = 60           # tool output appended per turn
    assistant_words: int = 30      # recorded assistant reply kept in the history
    output_tokens: int = 32        # tokens the server must generate per turn (ignore_eos on the request)
    think_ms: int = 500            # mean delay after a response before the next turn
    subagent_rate: float = 0.2     # share of sessions that spawn one subagent session
    seed: int = 42
    marker: str = FORMER          # keyspace marker, e.g. "<case id> <run id>"; by default the former name: same bytes


_N_CODE, _N_SYLLABLES = len(_CODE), len(_SYLLABLES)
_BITS_CODE, _BITS_SYLLABLES, _BITS_3 = _N_CODE.bit_length(), _N_SYLLABLES.bit_length(), (3).bit_length()


def _words(rng: random.Random, n: int) -> str:
    """``n`` words, each a code word (40%) or one to three syllables. The draws are ``rng.random``,
    ``rng.choice`` and ``rng.randint(1, 3)``, written out as what they do in CPython's random.py: ``randbelow(m)``
    is ``getrandbits(m.bit_length())`` drawn again while ``>= m``. The same seed gives the same bytes for 0.27x the
    CPU of those calls (tests/test_load.py pins the bytes; benchmarks/trace_cost.py measures both in one run)."""
    bits, uniform, out = rng.getrandbits, rng.random, []
    for _ in range(n):
        if uniform() < 0.4:
            i = bits(_BITS_CODE)
            while i >= _N_CODE:
                i = bits(_BITS_CODE)
            out.append(_CODE[i])
            continue
        k = bits(_BITS_3)
        while k >= 3:
            k = bits(_BITS_3)
        parts = []
        for _ in range(k + 1):
            i = bits(_BITS_SYLLABLES)
            while i >= _N_SYLLABLES:
                i = bits(_BITS_SYLLABLES)
            parts.append(_SYLLABLES[i])
        out.append("".join(parts))
    return " ".join(out)


def _skip_words(rng: random.Random, n: int) -> str:
    """``_words(rng, n)``'s draws without its words (""): the generator's state after them is the same."""
    bits, uniform = rng.getrandbits, rng.random
    for _ in range(n):
        if uniform() < 0.4:
            while bits(_BITS_CODE) >= _N_CODE:
                pass
            continue
        k = bits(_BITS_3)
        while k >= 3:
            k = bits(_BITS_3)
        for _ in range(k + 1):
            while bits(_BITS_SYLLABLES) >= _N_SYLLABLES:
                pass
    return ""


def _session(rng: random.Random, spec: TraceSpec, sid: str, system: str, turns: int, words) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": system}]
    lines = []
    for turn in range(turns):
        if turn:
            messages.append({"role": "assistant", "content": words(rng, spec.assistant_words)})
            messages.append({"role": "user", "content": "tool result:\n" + words(rng, spec.tool_words)})
        messages.append({"role": "user", "content": words(rng, spec.user_words)})
        line = {"session_id": sid, "messages": [dict(m) for m in messages], "output_length": spec.output_tokens}
        if turn:
            line["delay"] = max(0, int(rng.expovariate(1 / spec.think_ms))) if spec.think_ms else 0
        lines.append(line)
    return lines


def _lines(spec: TraceSpec, words) -> list[dict]:
    rng = random.Random(f"{spec.seed}")
    lines: list[dict] = []
    for i in range(spec.sessions):
        sid = f"s{i:04d}"
        system = f"[{spec.marker} {sid}] You are a coding agent. Repository context:\n" + words(rng, spec.system_words)
        turns = max(2, rng.randint(spec.turns - 1, spec.turns + 1))
        lines += _session(rng, spec, sid, system, turns, words)
        if rng.random() < spec.subagent_rate:
            lines += _session(rng, spec, f"{sid}-sub1", system + "\nSubagent task: " + words(rng, 12),
                              max(2, turns // 2), words)
    return lines


def generate(spec: TraceSpec) -> list[dict]:
    return _lines(spec, _words)


@functools.lru_cache(maxsize=64)
def sessions(spec: TraceSpec) -> int:
    """How many sessions (subagents included) the trace holds: ``generate``'s walk with every draw made but no word
    written (which subagents there are depends on every draw before them), at about two thirds of its cost; what a
    render or a preflight prints before the trace is written (tests/test_load.py checks it against ``generate``)."""
    return len({line["session_id"] for line in _lines(spec, _skip_words)})


def write(spec: TraceSpec, path: Path) -> dict:
    """Write the JSONL trace; returns a summary (sessions incl. subagents, turns, bytes)."""
    lines = generate(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    sessions = {line["session_id"] for line in lines}
    return {"sessions": len(sessions), "turns": len(lines), "bytes": path.stat().st_size}
