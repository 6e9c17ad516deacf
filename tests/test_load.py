"""Load generation, offline: the agentic trace generator and the AIPerf command a point gets."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servebench.load import aiperf, traces
from servebench.matrix import Point
from servebench.catalog import Catalog
from servebench.server.placement import dry_placement
from servebench.server.plan import plan
from tests.conftest import by_id, edit


def test_trace_is_deterministic_and_keyed_by_the_point(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    traces.write(traces.TraceSpec(sessions=5, marker="p-c4 run1"), a)
    traces.write(traces.TraceSpec(sessions=5, marker="p-c4 run1"), b)
    traces.write(traces.TraceSpec(sessions=5, marker="p-c8 run1"), c)
    assert a.read_bytes() == b.read_bytes()
    first = json.loads(a.read_text().splitlines()[0])["messages"][0]["content"]
    assert first.startswith("[p-c4 run1 s0000]")                  # the keyspace marker opens every prompt
    assert json.loads(c.read_text().splitlines()[0])["messages"][0]["content"].startswith("[p-c8 run1 s0000]")


@settings(max_examples=40, deadline=None)
@given(sessions=st.integers(1, 12), turns=st.integers(2, 6), think=st.integers(0, 2000),
       rate=st.floats(0, 1), seed=st.integers(0, 10**6))
def test_sessions_grow_a_shared_prefix_turn_by_turn(sessions, turns, think, rate, seed):
    lines = traces.generate(traces.TraceSpec(sessions=sessions, turns=turns, think_ms=think, subagent_rate=rate,
                                             seed=seed, output_tokens=7))
    by_session: dict[str, list[dict]] = {}
    for line in lines:
        by_session.setdefault(line["session_id"], []).append(line)
    parents = [s for s in by_session if "-sub" not in s]
    assert len(parents) == sessions
    for sid, turns_ in by_session.items():
        assert "delay" not in turns_[0] and all(t["delay"] >= 0 for t in turns_[1:])
        assert all(t["output_length"] == 7 for t in turns_)
        for prev, nxt in zip(turns_, turns_[1:]):
            assert nxt["messages"][:len(prev["messages"])] == prev["messages"]   # the prefix only grows
            assert len(nxt["messages"]) == len(prev["messages"]) + 3            # reply, tool result, instruction
        if "-sub" in sid:                       # a subagent shares its parent's system prompt as its prefix
            parent = by_session[sid.split("-sub")[0]][0]["messages"][0]["content"]
            assert turns_[0]["messages"][0]["content"].startswith(parent)


def test_aiperf_command_of_a_local_point(catalog, tmp_path):
    prof = by_id(catalog, "tiny-llama-cpu-dynamo")
    sp = plan(prof, dry_placement(prof))
    argv = aiperf.command(prof, Point(prof, 4), sp, aiperf_bin="aiperf", artifact_dir=tmp_path / "a",
                          tokenizer="local/tiny-llama", trace=tmp_path / "t.jsonl", sessions=96)
    flag = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert argv[:2] == ["aiperf", "profile"] and flag("--ui") == "none" and flag("--concurrency") == "4"
    assert flag("--benchmark-duration") == "20" and "--benchmark-grace-period" not in argv   # AIPerf's 30 s
    assert flag("--random-seed") == "42" and flag("--tokenizer") == "local/tiny-llama"
    assert flag("--warmup-request-count") == "4" and flag("--num-sessions") == "96"
    assert flag("--custom-dataset-type") == "mooncake_trace" and flag("--failed-request-threshold") == "0.0"
    assert flag("--connection-reuse-strategy") == "sticky-user-sessions" and "--use-server-token-count" in argv
    assert flag("--server-metrics") == "http://127.0.0.1:18081/metrics" and flag("--url") == "http://127.0.0.1:8000"
    assert "--burst-phase-starts" not in argv


@pytest.mark.parametrize("burst", [False, True])
def test_named_corpus_uses_agentic_replay_with_the_recipe_caps(recipes, tmp_path, burst):
    if burst:
        edit(recipes / "kimi-k3/gb200/_agentx.yaml", "    seed: 42\n", "    seed: 42\n    burst_phase_starts: true\n")
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    sp = plan(prof, dry_placement(prof))
    argv = aiperf.command(prof, Point(prof, 64), sp, aiperf_bin="aiperf", artifact_dir=tmp_path, tokenizer="t",
                          trace=None, sessions=None)
    assert argv[argv.index("--public-dataset") + 1] == "semianalysis_cc_traces_weka_062126"
    assert argv[argv.index("--system-idle-gap-cap-seconds") + 1] == "10"     # the whole replay (seed)
    assert argv[argv.index("--trace-idle-gap-cap-seconds") + 1] == "300"     # each trace
    assert argv[argv.index("--agentic-warmup-grace-period") + 1] == "3600"
    assert argv.count("--server-metrics") == 4                        # one per engine-owning process
    assert ("--burst-phase-starts" in argv) is burst and "--input-file" not in argv


def test_offline_tokenizer_cache_layout(tmp_path):
    src = tmp_path / "model"
    src.mkdir()
    (src / "tokenizer.json").write_text("{}")
    (src / "tokenizer_config.json").write_text("{}")
    name = aiperf.offline_tokenizer(src, tmp_path / "hf", "tiny")
    repo = tmp_path / "hf/hub/models--local--tiny"
    sha = (repo / "refs/main").read_text()
    assert name == "local/tiny" and (repo / "snapshots" / sha / "tokenizer.json").is_file()
    assert aiperf.offline_tokenizer(src, tmp_path / "hf", "tiny") == name            # idempotent
