"""Real components on this machine (marker `local`): vLLM and Dynamo servers started from local recipes, real
AIPerf runs. A fake server appears only for fault injection (500s, mid-stream disconnects, everything failing).

Skipped with the reason until scripts/install-servers has made .venvs/serve and .venvs/aiperf."""

import dataclasses
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from rackbench.catalog.loader import Catalog
from rackbench.catalog.points import Point
from rackbench.cluster import ProcessDied
from rackbench.core.results_folder import ResultsFolder
from rackbench.load.aiperf import AiperfGenerator
from rackbench.load.measure import measure
from rackbench.load.steady import needed
from rackbench.results.model import parse
from rackbench.results.model import problems as validate
from rackbench.results.point import store
from rackbench.results.schema import file_problems
from rackbench.results.slo import decider_for
from rackbench.results.verdict import judge
from rackbench.server.assembly import Assembly
from rackbench.server.generated import ensure_model
from rackbench.server.plan import Engine, ProcSpec, ServerPlan
from tests.conftest import REPO, edit

pytestmark = pytest.mark.local
SERVE_PY = REPO / ".venvs/serve/bin/python"
AIPERF = REPO / ".venvs/aiperf/bin/aiperf"
FAKE = Path(__file__).with_name("fakeserver.py")


@pytest.fixture(scope="module")
def installed():
    for path in (SERVE_PY, AIPERF):
        if not path.exists():
            pytest.skip(f"{path} missing: run scripts/install-servers")


@pytest.fixture(scope="module")
def tiny_model(installed, tmp_path_factory):
    return ensure_model("tiny-llama", str(SERVE_PY), tmp_path_factory.mktemp("gen") / "model.log")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """The shipped local recipes with short points (6 s) for these tests."""
    root = tmp_path_factory.mktemp("cat") / "recipes"
    shutil.copytree(REPO / "recipes", root)
    edit(root / "local/_sweep.yaml", "duration_s: 20", "duration_s: 6")
    edit(root / "local/_sweep.yaml", "warmup_grace_s: 30", "warmup_grace_s: 15")
    return Catalog.load(root)


def profile(catalog, name):
    return next(p for p in catalog.profiles if p.id == f"tiny-llama-cpu-{name}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(prof, tmp_path, model, recipe_plan=None):
    """The profile's servers on this machine, through the run assembly (as a session starts them)."""
    assembly = Assembly(prof, ResultsFolder.at(tmp_path), "live", root=REPO)
    alloc = assembly.allocate()
    try:
        _, sp = assembly.plan(alloc, model)
        if recipe_plan is not None:          # a fake server's plan, with the client the profile's plan places
            recipe_plan = dataclasses.replace(recipe_plan, client=sp.client)
        return assembly.start(alloc, model, recipe_plan or sp)
    except BaseException:
        alloc.release()
        raise


def run_point(prof, conc, dep, tmp_path, **kw):
    """One point measured by real AIPerf against ``dep`` and stored, as the sb_measured fixture does."""
    folder = ResultsFolder.at(tmp_path)
    # a run id of its own, as every session has: the module's tests share one server, and a point replaying another
    # test's prompts would start on their cached prefixes (the reuse check calls that a warm cache, rightly)
    m = measure(Point(prof, conc), dep, AiperfGenerator(str(AIPERF)), folder.case(prof.id, f"{prof.id}-c{conc}"),
                run_id=f"live-{tmp_path.name}", decide=decider_for(prof), **kw)
    return store(m, folder)


# ---- real servers ----

def stream_chat(api: str, model: str) -> tuple[list[dict], str]:
    body = {"model": model, "messages": [{"role": "user", "content": "def add(a, b):"}], "max_tokens": 12,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    chunks, last = [], ""
    with httpx.stream("POST", f"{api}/v1/chat/completions", json=body, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data: "):
                last = line[6:]
                if last != "[DONE]":
                    chunks.append(json.loads(last))
    return chunks, last


def listening_of(token: str) -> list:
    """Every TCP socket a process of the deployment with ``token`` listens on (rackbench.server.identity)."""
    from rackbench.core.listeners import environment_of, sockets
    from rackbench.server.identity import TOKEN_ENV
    return [s for s in sockets() if s.listening and s.pid and environment_of(s.pid).get(TOKEN_ENV) == token]


@pytest.fixture(scope="module")
def vllm_server(catalog, tiny_model, tmp_path_factory):
    dep = start(profile(catalog, "vllm"), tmp_path_factory.mktemp("vllm"), tiny_model)
    yield dep
    dep.allocation.release()


@pytest.mark.parametrize("kind", ["vllm", "dynamo"])
def test_real_server_streams_chat_and_its_counters_add_up(kind, catalog, tiny_model, vllm_server, tmp_path):
    dep = vllm_server if kind == "vllm" else start(profile(catalog, "dynamo"), tmp_path, tiny_model)
    try:
        assert dep.versions["vllm"].startswith("0.31.0")
        if kind == "dynamo":
            assert dep.versions["dynamo"] == "1.6.1" and dep.plan.kind == "dynamo"
        before = dep.scrape()
        chunks, last = stream_chat(dep.plan.api_url, "tiny")
        after = dep.scrape()
        assert last == "[DONE]"
        assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
        assert sum(1 for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("content")) >= 2
        usage = chunks[-1]["usage"]
        assert usage["completion_tokens"] == 12
        (url,) = dep.plan.metrics_urls
        delta = after[url] - before[url]
        assert delta.generation_tokens == 12 and delta.prompt_tokens == usage["prompt_tokens"]
        assert delta.prefix_cache_queries == usage["prompt_tokens"] and delta.requests_succeeded == 1
        assert delta.external_prefix_cache_hits == 0 and delta.preemptions == 0     # no connector on CPU
        assert after[url].idle and after[url].engines == 1
        # every socket its processes listen on is on loopback: nothing of the local backend is offered beyond it,
        # but for Dynamo 1.6.1's direct-ZMQ event-plane publishers, which bind tcp://0.0.0.0:0 whatever it is told
        # (docs/clusters.md: what listens where); each of them is named in its worker's log, and nothing else may be
        heard = listening_of(dep.token)
        assert any(s.port == int(dep.plan.api_url.rsplit(":", 1)[1]) for s in heard), heard
        logs = "\n".join(p.log.read_text(errors="replace") for p in dep.processes.values())
        event_plane = {int(port) for port in re.findall(r"ZMQ PUB transport bound .*?tcp://0\.0\.0\.0:(\d+)", logs)}
        beyond = [s.describe() for s in heard if not ipaddress.ip_address(s.address).is_loopback and
                  not (kind == "dynamo" and s.port in event_plane)]
        assert beyond == [], beyond
    finally:
        if kind == "dynamo":
            dep.allocation.release()


def test_real_aiperf_point_on_real_server(catalog, vllm_server, tmp_path):
    prof = profile(catalog, "vllm")
    status: list[str] = []
    out = run_point(prof, 2, vllm_server, tmp_path, progress=status.append, tick_s=2)
    r = out.result.dump()
    phases = [s.removeprefix("tiny-llama-cpu-vllm-c2: ").split(" ", 1)[0] for s in status]
    assert status and all(s.startswith("tiny-llama-cpu-vllm-c2: ") and s.endswith(" errors so far") for s in status)
    assert set(phases) <= {"start-up", "warm-up", "profiling", "grace"} and "profiling" in phases, status
    assert phases == sorted(phases, key=["start-up", "warm-up", "profiling", "grace"].index), status   # in order
    assert any(re.search(r"profiling \d+ s of ~\d+ s, [1-9]\d* requests done", s) for s in status), status
    assert validate(r) == [] and file_problems(out.path) == [] and out.copy.is_file()
    assert r["run"]["exit_code"] == 0 and r["requests"]["successful"] > 0 and r["requests"]["errors"] == 0
    command = (out.path.parent / "aiperf-command.txt").read_text()
    import shlex
    assert shlex.split(command)[:2] == [str(AIPERF), "profile"] and "--url" in shlex.split(command)   # pastes back
    # client and server count the same tokens over the whole run (a retokenizing client is off by 10%: test_results)
    assert r["output_token_ratio"] == pytest.approx(1.0, abs=0.01)
    assert r["server"]["prefix_cache_hits"] > 0      # turns of a session share their growing prefix
    assert r["requests"]["warmup_dropped"] == 2 and r["identity"]["versions"]["aiperf"] == "0.13.0"
    assert judge(parse(r), prof).failures == []
    # every request in rackbench's own form beside the result: the profiled ones are the result's count
    from rackbench.results import requests as request_file
    sent = request_file.read(out.requests)
    assert len([q for q in sent if q.profiled]) == r["requests"]["completed"]
    assert len([q for q in sent if q.phase == "warmup"]) == 2 and all(q.ok and q.input_tokens for q in sent)
    # the machine it ran on, recorded before the servers: this host, no GPU (and no telemetry), said so
    (node,) = r["machine"]["nodes"]
    assert node["host"] == socket.gethostname() and node["cores"] >= 1 and node["memory_gib"] > 0
    assert node["gpus"] == [] and node["problems"] == ["no nvidia-smi on this node: no GPU record, no telemetry"]
    assert r["telemetry"] is None
    # #34: the host record holds the engine core (found by its parent: it writes its title over its environment), the
    # API server and the load generator, each with its CPU; the point's bound is judged with that evidence
    seen = {(p["name"], p["role"]) for p in r["host"]["processes"]}
    assert {("VLLM::EngineCore", "server"), ("python vllm.entrypoints.openai.api_server", "server")} <= seen, seen
    assert any(role == "client" and "aiperf" in name for name, role in seen), seen
    engine = next(p for p in r["host"]["processes"] if p["name"] == "VLLM::EngineCore")
    assert 0 < engine["cores_mean"] <= engine["cores_max"] and r["host"]["nodes"][0]["samples"] >= 5
    assert r["bound"]["bound"] in ("client", "load", "host") and r["bound"]["evidence"]["active_slices"] > 0
    assert r["run"]["ready_workers"] == r["run"]["expected_workers"] == 1       # #33: asked at the point's start


def test_server_dying_at_startup_fails_with_its_log_tail(catalog, tiny_model, tmp_path):
    prof = profile(catalog, "vllm")
    assembly = Assembly(prof, ResultsFolder.at(tmp_path), "live", root=REPO)
    _, sp = assembly.plan(assembly.backend.dry_run(assembly.request()), tiny_model)
    (w,) = sp.processes
    bad = ProcSpec(w.rank, w.name, w.role, (*w.argv, "--max-model-len", "100000"), w.env)   # > 8192 positions
    with pytest.raises(ProcessDied) as err:
        start(prof, tmp_path, tiny_model, recipe_plan=ServerPlan(**{**sp.__dict__, "processes": (bad,)}))
    msg = str(err.value)
    assert "worker0 on node local0" in msg and "exited with code" in msg
    assert "max_model_len" in msg or "max-model-len" in msg, msg


# ---- fault injection: real AIPerf against a fake server ----

def fake(prof, tmp_path, tiny_model, *flags):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = ProcSpec(0, "fake", "worker", (sys.executable, str(FAKE), "--port", str(port), *flags), {})
    sp = ServerPlan("vllm", "tiny", url, (proc,), (Engine(0, 0, f"{url}/metrics", "0"),), (f"{url}/health",), 1)
    return start(prof, tmp_path, tiny_model, recipe_plan=sp)


@pytest.mark.parametrize("flags, cause, lo, hi", [
    (("--error-every", "5"), "server_error", 0.12, 0.28),
    (("--disconnect-every", "4"), "transport", 0.15, 0.35),
])
def test_injected_faults_fail_the_point_with_the_measured_rate(catalog, tiny_model, tmp_path, flags, cause, lo, hi):
    prof = profile(catalog, "vllm")
    dep = fake(prof, tmp_path, tiny_model, *flags)
    try:
        r = run_point(prof, 2, dep, tmp_path).result.dump()
    finally:
        dep.allocation.release()
    assert validate(r) == []
    rate = r["requests"]["error_rate"]
    assert lo <= rate <= hi and set(r["requests"]["errors_by_cause"]) == {cause}
    msgs = judge(parse(r), prof).failures
    assert any(m.startswith(f"error rate {rate:.1%} (") and f"{cause} " in m for m in msgs), msgs


def test_all_requests_failing_is_a_failed_point_not_a_crash(catalog, tiny_model, tmp_path):
    prof = profile(catalog, "vllm")
    dep = fake(prof, tmp_path, tiny_model, "--fail-all")
    try:
        out = run_point(prof, 2, dep, tmp_path)
    finally:
        dep.allocation.release()
    r = out.result.dump()
    assert out.path.is_file() and validate(r) == []
    assert r["requests"]["successful"] == 0 and r["requests"]["errors"] > 0
    msgs = judge(parse(r), prof).failures
    assert msgs[0].startswith("0 successful requests of"), msgs


# ---- flags through the real parsers installed here ----

def run_cli(*args):
    import subprocess
    return subprocess.run([sys.executable, "-m", "rackbench", *args], cwd=REPO, capture_output=True, text=True)


def test_real_parsers_accept_shipped_flags_and_reject_a_vllm_serve_flag_on_the_worker(installed, recipes):
    """One run of the real parsers (a serving-venv interpreter importing vLLM and Dynamo: ~12 s a run) over every
    shipped profile, beside two more that pass `vllm serve`'s --tool-call-parser: `vllm serve` takes it, the Dynamo
    worker has no such flag."""
    for name, frontend in (("dynamo_tool", ""), ("vllm_tool", "  frontend: {type: vllm}\n")):
        (recipes / f"local/{name}.yaml").write_text(
            f"extends: _sweep.yaml\nprofile: {{name: {name}, concurrency: [2], layout: {{tp: 1}}}}\nrecipe:\n"
            f"  name: tiny-llama-local-{name}\n{frontend}"
            "  backend: {vllm_config: {aggregated: {tool-call-parser: hermes}}}\n")
    done = run_cli("--recipes", str(recipes), "flags")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if " worker" in ln or " frontend" in ln]
    rejected = [ln for ln in lines if not ln.endswith(" ok")]
    assert len(rejected) == 1 and rejected[0].startswith("tiny-llama-cpu-dynamo_tool worker0"), done.stdout
    assert "unrecognized arguments: --tool-call-parser hermes" in done.stdout
    assert any(ln.startswith("tiny-llama-cpu-vllm_tool worker0 ") for ln in lines), done.stdout     # taken: ok
    shipped = {ln.split()[0] for ln in lines}
    assert {"kimi-k3-gb200-dep", "tiny-llama-cpu-dynamo", "tiny-llama-cpu-vllm"} <= shipped, done.stdout


def test_pinned_flag_table_matches_the_installed_parsers(installed, tmp_path):
    import subprocess
    out = tmp_path / "table.json"
    subprocess.run([str(SERVE_PY), str(REPO / "rackbench/tools/flag_table.py"), "--out", str(out)], check=True,
                   capture_output=True)
    fresh = json.loads(out.read_text())
    pinned = json.loads((REPO / "rackbench/data/flags/dynamo-1.6.1_vllm-0.31.0.json").read_text())
    assert fresh["versions"] == pinned["versions"] and fresh["entrypoints"] == pinned["entrypoints"]


def test_stage_says_when_the_hub_is_out_of_reach_and_stages_what_this_host_sees(installed, tmp_path):
    """`rackbench stage`: the seed corpus cannot come from a machine without Hub access (one line with the fix);
    the embedded default's tokenizer, whose model this host sees, lands in the cache as the client reads it."""
    import os
    import subprocess
    cache = tmp_path / "cache"
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"}           # nothing listens there
    done = subprocess.run([sys.executable, "-m", "rackbench", "stage", "tp", "--cache", str(cache)], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1
    assert "stage: semianalysis_cc_traces_weka_062126 (semianalysisai/cc-traces-weka-062126) could not be fetched " \
           "from here: ConnectionError" in done.stderr
    assert f"the Hub cannot be reached from this machine: run `rackbench stage` where it can, with --cache naming " \
           f"the cluster's shared cache as that machine sees it ({cache})" in done.stderr
    assert "note: kimi-k3-gb200-tp: its model directory is not visible here" in done.stdout
    assert "stage: /mnt/lustre01/users-public/sa-shared/rackbench/models does not exist here, so " \
           "Inferact/Kimi-K3-DSpark has nowhere to go" in done.stderr         # the draft: nothing made on this host
    assert not Path("/mnt/lustre01").exists()
    done = subprocess.run([sys.executable, "-m", "rackbench", "stage", "tiny-llama-cpu-dynamo", "--cache", str(cache)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "stage: tokenizer local/tiny-llama from " in done.stdout
    assert (cache / "hub/models--local--tiny-llama/refs/main").is_file()


def test_stage_downloads_the_draft_model_where_the_cluster_file_names_it(installed, tmp_path):
    """#31 defect 2: every gb200-nv container mounts the DSpark drafter, and nothing staged it. rackbench's stage
    tool (AIPerf's interpreter, as `rackbench stage` runs it) downloads it whole into a folder of its own renamed
    into place, says when the Hub is out of reach with nothing half-made left, and leaves a complete one alone.
    Which drafts a profile stages, and where: tests/test_preflight.py."""
    import os
    import subprocess
    from rackbench.tools import STAGE
    shared = tmp_path / "lustre"
    shared.mkdir()
    req = json.dumps({"models": [{"repo": "Inferact/Kimi-K3-DSpark", "dest": str(shared / "dspark")}]})
    stage = [str(AIPERF.with_name("python")), str(STAGE), req]
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "2"}    # nothing listens there
    done = subprocess.run(stage, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 3 and "stage: Inferact/Kimi-K3-DSpark could not be fetched from here" in done.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["dspark.lock"]               # no partial copy
    (shared / "dspark").mkdir()
    (shared / "dspark/weights.bin").write_text("w")                   # a copy made by hand, not whole: left alone
    done = subprocess.run(stage, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and "exists but holds no config.json" in done.stderr, done.stderr
    assert sorted(p.name for p in (shared / "dspark").iterdir()) == ["weights.bin"]
    (shared / "dspark/config.json").write_text("{}")
    done = subprocess.run(stage, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == \
        f"stage: model Inferact/Kimi-K3-DSpark: already in {shared / 'dspark'}", done.stderr
    hub = json.dumps({"hub_tokenizers": ["moonshotai/Kimi-K3"], "cache": str(tmp_path / "cache")})   # an hf: model
    done = subprocess.run([str(AIPERF.with_name("python")), str(STAGE), hub], capture_output=True, text=True,
                          env={**env, "HF_HUB_CACHE": str(tmp_path / "cache/hub")}, timeout=300)
    assert done.returncode == 3 and "stage: the tokenizer of moonshotai/Kimi-K3 could not be fetched from here" \
        in done.stderr, done.stderr


# ---- run length: adaptive stopping, and a server that never settles ----

@pytest.fixture(scope="module")
def adaptive_catalog(tmp_path_factory):
    """The local recipes with points long enough to stop early: 120 s at most, two-turn sessions (the fewest: the
    load settles soon instead of slowing for minutes as four-turn contexts grow), enough of them not to run out; a
    loose target (±25%), half-second slices and checkpoints every 25% more time: the CPU server shares 2 cores with
    AIPerf, its throughput per slice wanders by ±20%, and a slow machine completes ~3 requests a second at c4."""
    root = tmp_path_factory.mktemp("adaptive") / "recipes"
    shutil.copytree(REPO / "recipes", root)
    edit(root / "local/_sweep.yaml", "duration_s: 20", "duration_s: 120")
    edit(root / "local/_sweep.yaml", "stop: {slice_s: 1.0, min_s: 20}",
         "stop: {slice_s: 0.5, min_s: 20, min_requests: 60, target: 0.25, growth: 1.25}")
    edit(root / "local/_sweep.yaml", "sessions_per_concurrency: 24", "sessions_per_concurrency: 200")
    edit(root / "local/_sweep.yaml", "turns: 4", "turns: 2")
    return Catalog.load(root)


def test_an_adaptive_point_ends_once_its_throughput_is_known(adaptive_catalog, vllm_server, tmp_path):
    """On the real CPU server: the rule stops AIPerf (its SIGINT path: it ends the run and writes its exports)
    well before the 120 s cap, and the result says why, when, and how precise; the stop is no failure."""
    prof = profile(adaptive_catalog, "vllm")
    out = run_point(prof, 4, vllm_server, tmp_path, run_length="adaptive")
    r = out.result.dump()
    run, steady = r["run"], r["steady"]
    assert run["mode"] == "adaptive" and run["stopped_at_s"] is not None and run["stopped_at_s"] < 110, \
        json.dumps([run, r["steady"]])
    assert run["stop_reason"].startswith("precise and steady at ") and run["was_cancelled"] is True
    assert steady["stationary"] is True and steady["half_width_rel"] <= 0.25 and steady["batches"] >= 8
    assert r["throughput"]["duration_s"] < 110 and r["requests"]["errors"] == 0
    assert judge(parse(r), prof).failures == []                             # rackbench's own stop is no abort
    assert len(r["series"]["t"]) >= 20 and max(r["series"]["output_tps"]) > 0 and sum(r["series"]["completed"]) > 0
    p99 = r["evidence"]["ttft_p99_ms"]        # a bound of the p99 exists from needed(0.99, 0.99) = 459 requests on
    if p99["requests"] >= needed(0.99, p99["confidence"]):                   # (a slow machine stops before that)
        assert p99["upper_bound"] >= p99["estimate"], p99
    else:
        assert p99["upper_bound"] is None, p99
    assert r["server"]["source"].startswith("engine counters over the measured window")


def test_a_drifting_server_is_reported_not_steady_and_runs_to_its_cap(adaptive_catalog, tiny_model, tmp_path):
    """A fake server whose tokens slow down over the point (the only thing a fake server is for: a fault the
    suite must handle): the adaptive rule never stops it, the series is not stationary, the drift is measured,
    and require_steady fails the point saying so."""
    prof = profile(adaptive_catalog, "vllm")
    prof = dataclasses.replace(prof, spec=prof.spec.model_copy(update={
        "load": prof.spec.load.model_copy(update={"duration_s": 30, "stop": prof.spec.load.stop.model_copy(
            update={"slice_s": 0.25})}),
        "gates": prof.spec.gates.model_copy(update={"require_steady": True})}))
    dep = fake(prof, tmp_path, tiny_model, "--itl-ms", "15", "--decay-per-s", "0.1")
    try:
        r = run_point(prof, 4, dep, tmp_path, run_length="adaptive").result.dump()
    finally:
        dep.allocation.release()
    assert r["run"]["stopped_at_s"] is None and r["run"]["stop_reason"].startswith("ran its whole duration_s")
    steady = r["steady"]
    assert steady["stationary"] is False and steady["drift_per_min_rel"] < -0.2, json.dumps([steady, r["series"]["output_tps"]])
    (msg,) = [m for m in judge(parse(r), prof).failures if m.startswith("not steady")]
    assert "drifts" in msg and "per minute" in msg and "profile.gates.require_steady" in msg


def descendants(name: str, where: str = "cmdline") -> list[int]:
    """The processes under this one (the servers and load generator it started) whose command line (or ``comm``,
    the title a process gave itself: vLLM's engine calls itself VLLM::EngineCore) holds ``name``."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    def under(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == os.getpid():
                return True
        return False
    found = []
    for pid in parent:
        try:
            cmd = (Path("/proc") / str(pid) / where).read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if name in cmd and under(pid):
            found.append(pid)
    return found


class Freezer:
    """SIGSTOP the processes ``find()`` names ``after_s`` into the profiling phase (from the first progress line
    that says profiling), SIGCONT them ``for_s`` later. ``tick`` is the point's progress callback."""

    def __init__(self, find, after_s: float, for_s: float):
        self.find, self.after_s, self.for_s = find, after_s, for_s
        self.frozen: list[int] = []
        self.thread: threading.Thread | None = None

    def _freeze(self, already_s: float):
        time.sleep(max(0.0, self.after_s - already_s))
        self.frozen.extend(self.find())
        for pid in self.frozen:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(self.for_s)
        self.thaw()

    def thaw(self):
        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def tick(self, status: str):
        # the line that first says profiling may come seconds into the phase on a busy machine: count from its
        # own figure, or the freeze lands past the window (CI on 2 busy cores, 2026-12-06)
        found = re.match(r"profiling (\d+) s of", status.split(": ", 1)[1])
        if self.thread is None and found:
            self.thread = threading.Thread(target=self._freeze, args=(float(found.group(1)),), daemon=True)
            self.thread.start()

    def join(self):
        if self.thread is not None:
            self.thread.join(timeout=self.after_s + self.for_s + 30)
        self.thaw()


@pytest.mark.parametrize("what, said", [
    # the engine's gauges go still with it: a request sent while it is stopped shows as none running
    ("EngineCore", ("requests running or waiting: a stopped or hung engine",
                    "or an engine stopped before it took them in")),
    ("aiperf", ("a stalled load generator",))])      # with answers it did not read in flight, or none
def test_a_frozen_engine_or_load_generator_fails_its_point_saying_which(catalog, vllm_server, tmp_path, what, said):
    """#35: SIGSTOP of vLLM's engine, or of AIPerf's processes, for 60 s passed c1. Here each is frozen for 12 s
    from the first profiling tick, with profile.gates.max_stall_s at 4 s: the point fails on the stall alone. AIPerf
    is frozen at c4, so that requests are in flight when it stops (frozen between two turns of a c1 session past
    the end of its duration, it sends nothing after and its window ends before the freeze: a shorter measurement,
    not a wrong one)."""
    prof = profile(catalog, "vllm")
    prof = dataclasses.replace(prof, spec=prof.spec.model_copy(update={
        "gates": prof.spec.gates.model_copy(update={"max_stall_s": 4.0})}))
    # frozen for 12 s: past the 4 s bound even after the in-flight requests of a cold cache drain
    freezer = Freezer(lambda: descendants(what) if what == "aiperf" else descendants("EngineCor", "comm"), 0, 12)
    try:
        r = run_point(prof, 4 if what == "aiperf" else 1, vllm_server, tmp_path, progress=freezer.tick, tick_s=1).result
    finally:
        freezer.join()
    frozen = freezer.frozen
    assert frozen, f"no {what} process was found to freeze"
    stall = next(c for c in judge(r, prof).checks if c.name == "stall")
    assert not stall.ok and stall.message.startswith("the server's token counters stood still for "), stall.message
    assert any(s in stall.message for s in said), (stall.message, r.series.model_dump())
    assert "profile.gates.max_stall_s = 4.0 s" in stall.message


def test_a_search_probes_in_one_deployment_and_stores_each_probe_and_its_answer(catalog, vllm_server, tmp_path):
    """#32: profile.search on the real CPU server (the module's one deployment): probes doubling from the range's
    low end, each a stored and judged point, the answer beside them; a generous tier is met up to the range's top
    (two probes: the bisection is tests/test_search.py's, offline, and scripts/bench runs the whole search)."""
    from rackbench.plugin.search import run
    prof = profile(catalog, "vllm_search")
    prof = dataclasses.replace(prof, spec=prof.spec.model_copy(update={
        "concurrency": [1, 2], "load": prof.spec.load.model_copy(update={"duration_s": 5}),
        "search": prof.spec.search.model_copy(update={"relative": None}),     # this tier's own fixed limits
        "slo": {"search": prof.spec.slo["search"].model_copy(update={"ttft_ms": 30_000.0, "tpot_ms": 1000.0,
                                                                  "attainment": 0.5})}}))   # 5 s probes: few requests
    folder = ResultsFolder.at(tmp_path)
    answer = run(prof, vllm_server, folder, "live", AiperfGenerator(str(AIPERF)))
    assert [p["concurrency"] for p in answer["probes"]] == [1, 2] and answer["not_measured"] == [], answer
    assert answer["answer"] == 2 and answer["bracket"] == [2, None] and all(p["verdict"] == "met" for p in answer["probes"])
    assert json.loads(folder.search(prof.id).read_text())["answer"] == 2
    for p in answer["probes"]:
        stored = json.loads(folder.point(p["case_id"]).read_text())
        assert stored["verdict"] is not None and stored["slo"][-1]["tier"] == "search" and stored["slo"][-1]["gated"] is False


def test_a_decided_point_stops_once_its_slo_gate_is_met_with_confidence(adaptive_catalog, vllm_server, tmp_path):
    """#32 item 3: `--run-length decide` on the real CPU server: a generous gated tier is met with confidence at an
    early checkpoint (100 requests at least), long before the 120 s cap; the result says which rule stopped it."""
    prof = profile(adaptive_catalog, "vllm")
    prof = dataclasses.replace(prof, spec=prof.spec.model_copy(update={
        "gates": prof.spec.gates.model_copy(update={"slo": "relaxed"}),
        "slo": {"relaxed": prof.spec.slo["relaxed"].model_copy(update={"ttft_ms": 30_000.0, "e2e_ms": 60_000.0,
                                                                         "attainment": 0.5})}}))
    r = run_point(prof, 4, vllm_server, tmp_path, run_length="decide").result
    assert r.run.mode == "decide" and r.run.stopped_at_s is not None and r.run.stopped_at_s < 90, r.run
    assert r.run.stop_reason.startswith("decided: tier relaxed met at "), r.run.stop_reason
    assert r.requests.completed >= 100 and r.run.was_cancelled is True
    (tier,) = r.slo
    assert tier.verdict == "met" and judge(r, prof).failures == []          # rackbench's own stop is no abort


@pytest.mark.parametrize("what, cause", [
    ("EngineCore", "its engine stopped or hung"),
    ("api_server", "the server's API stopped answering")])
def test_a_server_frozen_in_the_windows_last_seconds_fails_its_point_naming_it(catalog, vllm_server, tmp_path, what,
                                                                              cause):
    """#54: the engine (or the API server) stopped at ~17 s of a 20 s window passed: the stall check ran only to the
    last answered request, and the requests AIPerf cancelled at its grace's end were counted nowhere. Here the
    server is frozen 9 s into a 12 s window with a 4 s grace, until after the window: the requests it never answered
    are counted as errors and the point fails on them, naming what stopped."""
    prof = profile(catalog, "vllm")
    prof = dataclasses.replace(prof, spec=prof.spec.model_copy(update={"load": prof.spec.load.model_copy(update={
        "duration_s": 12, "post_duration_grace_s": 4.0})}))
    engine = descendants("EngineCor", "comm")
    frozen = engine if what == "EngineCore" else [p for p in descendants("vllm.entrypoints") if p not in engine]
    assert frozen, f"no {what} process was found to freeze"
    freezer = Freezer(lambda: frozen, 9, 12)
    try:
        r = run_point(prof, 4, vllm_server, tmp_path, progress=freezer.tick, tick_s=1).result
    finally:
        freezer.join()
    verdict = judge(r, prof)
    said = json.dumps([freezer.frozen, r.run.model_dump(mode="json"), r.requests.model_dump(mode="json"),
                       [c.message for c in verdict.checks if not c.ok]])
    assert not verdict.passed, said
    assert r.requests.unanswered and r.requests.errors_by_cause.get("unanswered") == r.requests.unanswered, said
    assert r.run.window is not None and r.run.window.end_s > r.run.window.last_answer_s
    answered = next(c for c in verdict.checks if c.name == "answered")
    assert not answered.ok and "never answered" in answered.message and cause in answered.message, answered.message
    trace = [c for c in verdict.checks if c.name == "trace"]
    assert not trace, trace                       # not "the trace ran out": the wrong cause and a wrong fix
