"""Load generation, offline: the agentic trace generator and the AIPerf command a point gets."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackbench.catalog.loader import Catalog
from rackbench.catalog.points import Point
from rackbench.core.results_folder import CaseFolder
from rackbench.load import aiperf, traces
from rackbench.load.generator import LoadJob
from rackbench.server.assembly import dry_plan
from tests.conftest import REPO, by_id, edit


def job(prof, conc, case_dir, trace=None, sessions=None, tokenizer_dir=None) -> LoadJob:
    _, sp = dry_plan(prof)
    client = dataclasses.replace(sp.client, model=str(tokenizer_dir) if tokenizer_dir else None)
    return LoadJob(Point(prof, conc), sp.api_url, sp.model_name, tuple(sp.metrics_urls), CaseFolder(case_dir), "r",
                   client, trace=trace, sessions=sessions)


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
    spec = traces.TraceSpec(sessions=sessions, turns=turns, think_ms=think, subagent_rate=rate, seed=seed,
                            output_tokens=7)
    lines = traces.generate(spec)
    by_session: dict[str, list[dict]] = {}
    for line in lines:
        by_session.setdefault(line["session_id"], []).append(line)
    parents = [s for s in by_session if "-sub" not in s]
    assert len(parents) == sessions and traces.sessions(spec) == len(by_session)    # counted without the text
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
    argv = aiperf.AiperfGenerator("aiperf").command(job(prof, 4, tmp_path, tmp_path / "t.jsonl", 96, tmp_path))
    flag = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert argv[:2] == ["aiperf", "profile"] and flag("--ui") == "none" and flag("--concurrency") == "4"
    assert flag("--benchmark-duration") == "20" and "--benchmark-grace-period" not in argv   # AIPerf's 30 s
    assert flag("--random-seed") == "42" and flag("--tokenizer") == "local/tiny-llama"
    assert flag("--warmup-request-count") == "4" and flag("--num-sessions") == "96"
    assert flag("--custom-dataset-type") == "mooncake_trace" and flag("--failed-request-threshold") == "0.0"
    assert flag("--connection-reuse-strategy") == "sticky-user-sessions" and "--use-server-token-count" in argv
    assert flag("--server-metrics") == "http://127.0.0.1:18081/metrics" and flag("--url") == "http://127.0.0.1:8000"
    assert "--burst-phase-starts" not in argv and flag("--artifact-dir") == str(tmp_path / "aiperf")


@pytest.mark.parametrize("burst", [False, True])
@pytest.mark.catalog("kimi-k3")
def test_named_corpus_uses_agentic_replay_with_the_recipe_caps(recipes, tmp_path, burst):
    if burst:
        edit(recipes / "presets/seed-harness.yaml", "    seed: 42\n", "    seed: 42\n    burst_phase_starts: true\n")
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    argv = aiperf.AiperfGenerator("aiperf").command(job(prof, 64, tmp_path))
    assert argv[argv.index("--public-dataset") + 1] == "semianalysis_cc_traces_weka_062126"
    assert argv[argv.index("--system-idle-gap-cap-seconds") + 1] == "10"     # the whole replay (seed)
    assert argv[argv.index("--trace-idle-gap-cap-seconds") + 1] == "300"     # each trace
    assert argv[argv.index("--agentic-warmup-grace-period") + 1] == "3600"
    assert argv.count("--server-metrics") == 4                        # one per engine-owning process
    assert ("--burst-phase-starts" in argv) is burst and "--input-file" not in argv


def tokenizer_cache(*args) -> subprocess.CompletedProcess:
    from rackbench.tools import TOKENIZER_CACHE
    return subprocess.run([sys.executable, str(TOKENIZER_CACHE), *map(str, args)], capture_output=True, text=True)


def test_the_tokenizer_is_cached_where_the_client_runs_with_what_a_remote_code_tokenizer_needs(tmp_path):
    """A tiktoken tokenizer with remote code (Kimi's layout) keeps its model file and its tokenization_*.py; the
    weights stay behind; a second run changes nothing."""
    src = tmp_path / "model"
    src.mkdir()
    for name, text in (("tiktoken.model", "abc 0"), ("tokenization_kimi.py", "class T: pass"),
                       ("tokenizer_config.json", '{"auto_map": {}}'), ("config.json", "{}"),
                       ("model-00001.safetensors", "weights")):
        (src / name).write_text(text)
    done = tokenizer_cache(src, tmp_path / "hf", "kimi")
    assert done.returncode == 0 and done.stdout.strip() == "local/kimi", done.stderr
    repo = tmp_path / "hf/hub/models--local--kimi"
    snap = repo / "snapshots" / (repo / "refs/main").read_text()
    assert sorted(p.name for p in snap.iterdir()) == ["config.json", "tiktoken.model", "tokenization_kimi.py",
                                                      "tokenizer_config.json"]
    assert tokenizer_cache(src, tmp_path / "hf", "kimi").stdout.strip() == "local/kimi"         # idempotent
    assert len(list((repo / "snapshots").iterdir())) == 1


def test_a_model_directory_with_no_tokenizer_or_empty_files_stops_the_client_first(tmp_path):
    """The seed's failure: an empty tokenizer snapshot built without an error, AIPerf failing only after the model
    loaded. Here the client's first step stops with one line naming the folder as that host sees it."""
    (tmp_path / "empty").mkdir()
    done = tokenizer_cache(tmp_path / "empty", tmp_path / "hf", "m")
    assert done.returncode == 2 and f"no tokenizer in {tmp_path / 'empty'} as this host sees it" in done.stderr
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero/tokenizer.json").write_text("")
    done = tokenizer_cache(tmp_path / "zero", tmp_path / "hf", "m")
    assert done.returncode == 2 and "only empty files" in done.stderr
    assert not (tmp_path / "hf/hub/models--local--m").exists()


def test_aiperf_prepares_where_the_client_runs_and_reads_from_the_shared_cache(catalog, tmp_path):
    """On gb200-nv: the tokenizer copy is made on the head node from /model (the node-local model as the container
    sees it) into the shared cache; AIPerf runs offline from it, the dataset mmap cache shared by every point, and
    its dataset configuration timeouts are the recipe's (seed: 1800 s)."""
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    _, sp = dry_plan(prof)
    j = LoadJob(Point(prof, 64), sp.api_url, sp.model_name, tuple(sp.metrics_urls), CaseFolder(tmp_path / "c"), "r",
                sp.client)
    inv = aiperf.AiperfGenerator().invocation(j)
    cache = "/mnt/lustre01/users-public/sa-shared/rackbench/cache"
    (step,) = inv.steps
    assert step["argv"] == ["python3", "/rackbench-tools/tokenizer_cache.py", "/model", cache, "kimi-k3"]
    assert inv.argv[:3] == ["python3", "-m", "aiperf"] and inv.argv[inv.argv.index("--tokenizer") + 1] == "local/kimi-k3"
    assert inv.env["HF_HOME"] == cache and inv.env["HF_HUB_OFFLINE"] == inv.env["HF_DATASETS_OFFLINE"] == "1"
    assert inv.env["AIPERF_DATASET_MMAP_CACHE_DIR"] == f"{cache}/aiperf-mmap"
    assert inv.env["AIPERF_DATASET_CONFIGURATION_TIMEOUT"] == inv.env["AIPERF_DATASET_PUBLIC_DATASET_TIMEOUT"] == "1800"
    assert float(inv.env["AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT"]) >= 1800      # AIPerf refuses less
    assert inv.env["TMPDIR"].startswith("/tmp/sb-aiperf-") and inv.env["TMPDIR"] in step["mkdir"]
    assert not (tmp_path / "c").exists()                # nothing is written before the client's step runs
    assert sp.client.preamble[0]["argv"][-1] == "aiperf==0.13.0"


def test_render_shows_the_sessions_the_run_writes(catalog, tmp_path):
    """`rackbench render` takes a point's session count from the trace the run would write (subagents included),
    not from sessions_per_concurrency x concurrency."""
    from rackbench.load.measure import trace_spec
    from tests.conftest import run_cli
    prof = by_id(catalog, "tiny-llama-cpu-vllm")
    written = traces.write(trace_spec(Point(prof, 4), "RUN"), tmp_path / "t.jsonl")["sessions"]
    assert written > 4 * prof.spec.load.trace.sessions_per_concurrency          # subagent sessions too
    line = run_cli("render", "tiny-llama-cpu-vllm-c4").stdout.splitlines()[-1]
    assert line.split("--num-sessions ")[1].split()[0] == str(written)


def test_progress_lines_name_the_phase_and_give_it_its_own_clock():
    """'60 s of ~20 s, 0 requests done' read as a hang: start-up, warm-up, profiling and grace are named, and
    profiling counts from the end of the warm-up, not from the generator's start."""
    from rackbench.load.progress import Phases
    p = Phases(duration_s=20, warmup=4)
    assert p.line(15, 0).startswith("start-up 15 s")
    assert p.line(30, 2) == "warm-up 0 s, 2 of 4 warm-up requests done"
    assert p.line(33, 3).startswith("warm-up 3 s")
    assert p.line(35, 4) == "profiling 0 s of ~20 s, 4 requests done"
    assert p.line(50, 40) == "profiling 15 s of ~20 s, 40 requests done"
    assert p.line(60, 70).startswith("grace 5 s past the measured 20 s")
    assert "unknown" in Phases(20, 1).line(3, None)


def test_the_phase_clock_starts_when_the_series_saw_the_warm_up_end_not_at_the_next_line():
    from rackbench.load.progress import Phases
    p = Phases(duration_s=20, warmup=4)
    for at, done in ((1, 0), (5, 1), (8, 4), (9, 6)):
        p.observe(at, done)
    assert p.line(15, 10) == "profiling 7 s of ~20 s, 10 requests done"


def test_a_phase_seen_a_scrape_ahead_of_the_line_never_reads_negative():
    """#54/#56: `profiling -4 s of ~20 s`: the series saw the warm-up end on the sampler's clock, a little ahead of
    the clock the line was asked with."""
    from rackbench.load.progress import Phases
    p = Phases(duration_s=20, warmup=4)
    p.observe(10, 1)
    p.observe(14, 4)
    assert p.line(10.5, 4) == "profiling 0 s of ~20 s, 4 requests done"


KIMI_LIKE = {
    "tokenizer_config.json": '{"tokenizer_class": "KimiLikeTokenizer", "auto_map": {"AutoTokenizer": '
                             '["tokenization_kimi.KimiLikeTokenizer", null]}}',
    "tokenization_kimi.py": "from transformers import PreTrainedTokenizer\n"
                            "from .tool_declaration_ts import encode_tools\n\n\n"
                            "class KimiLikeTokenizer(PreTrainedTokenizer):\n"
                            "    def __init__(self, **kw):\n"
                            "        self.vocab = {'a': 0, 'b': 1}\n"
                            "        super().__init__(**kw)\n\n"
                            "    @property\n"
                            "    def vocab_size(self):\n"
                            "        return len(self.vocab)\n\n"
                            "    def get_vocab(self):\n"
                            "        return dict(self.vocab)\n\n"
                            "    def _tokenize(self, text):\n"
                            "        return [c for c in encode_tools(text) if c in self.vocab]\n\n"
                            "    def _convert_token_to_id(self, token):\n"
                            "        return self.vocab[token]\n\n"
                            "    def _convert_id_to_token(self, i):\n"
                            "        return 'ab'[i]\n",
    "tool_declaration_ts.py": "from .ts_helpers import lower\n\n\ndef encode_tools(text):\n    return lower(text)\n",
    "ts_helpers.py": "def lower(text):\n    return text.lower()\n",
    "tiktoken.model": "YQ== 0\nYg== 1\n",
    "config.json": "{}",
    "unrelated.py": "raise SystemExit('never copied')\n",
}


@pytest.mark.local
def test_a_remote_code_tokenizer_keeps_the_modules_it_imports_and_loads_offline(tmp_path):
    """Kimi's tokenization module does `from .tool_declaration_ts import ...`; the copy kept only the files the
    auto-map names, and transformers 4.57 raised OSError ... couldn't find them in the cached files. Loaded here
    offline, from the cache alone, by the load generator's own transformers."""
    aiperf_python = REPO / ".venvs/aiperf/bin/python"
    src = tmp_path / "model"
    src.mkdir()
    for name, text in KIMI_LIKE.items():
        (src / name).write_text(text)
    done = tokenizer_cache(src, tmp_path / "hf", "kimi")
    assert done.returncode == 0, done.stderr
    repo = tmp_path / "hf/hub/models--local--kimi"
    snap = repo / "snapshots" / (repo / "refs/main").read_text()
    assert {"tokenization_kimi.py", "tool_declaration_ts.py", "ts_helpers.py"} <= {p.name for p in snap.iterdir()}
    assert not (snap / "unrelated.py").exists()
    if not aiperf_python.exists():
        pytest.skip("run scripts/install-servers (the load generator's transformers loads the copy)")
    code = ("from transformers import AutoTokenizer; "
            "t = AutoTokenizer.from_pretrained('local/kimi', trust_remote_code=True); print(t.tokenize('AbBa'))")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    shutil.rmtree(src)                                  # the cache alone
    loaded = subprocess.run([str(aiperf_python), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "['a', 'b', 'b', 'a']", loaded.stderr[-2000:]


def test_clients_filling_one_cache_at_once_all_get_a_whole_snapshot(tmp_path):
    """Three concurrent copies into one shared cache failed 9 times in 24 on the fixed `<digest>.tmp` name: two
    rounds of 8 all pass here only by chance ((15/24)^16, under 0.1%) with a fixed name."""
    from rackbench.tools import TOKENIZER_CACHE
    src = tmp_path / "model"
    src.mkdir()
    for name, text in KIMI_LIKE.items():         # a vocabulary of real size keeps the copies in flight together
        (src / name).write_text(text * (20000 if name == "tiktoken.model" else 1))
    for round_ in range(2):
        cache = tmp_path / f"hf{round_}"
        runs = [subprocess.Popen([sys.executable, str(TOKENIZER_CACHE), str(src), str(cache), "kimi"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
        outs = [p.communicate(timeout=60) for p in runs]
        assert [p.returncode for p in runs] == [0] * 8, outs
        snaps = list((cache / "hub/models--local--kimi/snapshots").iterdir())
        assert len(snaps) == 1 and not [s for s in snaps if s.name.endswith(".tmp")]
        assert sorted(p.name for p in snaps[0].iterdir()) == sorted(n for n in KIMI_LIKE if n != "unrelated.py")


def _slow_setup_run(tmp_path, setup_s: float, **kw):
    """A generator step whose preamble takes ``setup_s`` (as the client's first environment install does)."""
    from rackbench.load.generator import Invocation, LocalProcess, generator_for
    from rackbench.tools import FOLDER, preamble_command
    steps = [{"name": "client-env", "argv": [sys.executable, "-c", f"import time; time.sleep({setup_s})"]}]
    inv = Invocation([sys.executable, "-c", "import time; time.sleep(1.0)"], {}, tmp_path / "out", tmp_path / "c.log",
                     tmp_path / "command.txt", steps=tuple(steps))
    argv = preamble_command(sys.executable, str(FOLDER), steps, inv.argv)
    seen: list[float] = []
    code = generator_for("aiperf").run(inv, start=lambda env, log: LocalProcess(argv, env, log),
                                       should_stop=lambda elapsed: seen.append(elapsed), setup=True, **kw)
    return code, seen, inv


def test_the_clients_setup_does_not_count_against_its_points_time(tmp_path):
    """A point's timeout, its elapsed time (the adaptive rule's clock) and its ticks count from the generator's own
    start: a 2 s preamble before a 1 s generator with a 1.5 s timeout is no timeout, and the rule never sees 2 s."""
    code, seen, _ = _slow_setup_run(tmp_path, 2.0, timeout=1.5)
    assert code == 0 and seen and seen[0] < 1.0 and max(seen) < 1.5, seen


def test_a_setup_that_never_ends_is_stopped_and_said(tmp_path, monkeypatch):
    from rackbench.load import generator
    monkeypatch.setattr(generator, "CLIENT_SETUP_S", 1.0)
    began = time.monotonic()
    with pytest.raises(generator.SetupTimeout, match="the client's setup ran past 1.0 s"):
        _slow_setup_run(tmp_path, 60.0, timeout=30.0)
    assert time.monotonic() - began < 20


@pytest.mark.parametrize("spec, digest", [
    (traces.TraceSpec(sessions=40), "f3e9003b88a05b2d"),
    (traces.TraceSpec(sessions=7, turns=9, seed=3, subagent_rate=0.7, think_ms=0), "7244ed162c99dbba")])
def test_a_seed_gives_the_same_sessions_as_every_earlier_release(spec, digest):
    """The trace of a seed is part of what a recorded point measured: a faster generator must give the same bytes
    (the digests are the generator's output at 54d1e0f, before its draws were written as _randbelow calls)."""
    import hashlib
    assert hashlib.sha256(json.dumps(traces.generate(spec)).encode()).hexdigest()[:16] == digest
