"""Real components on this machine (marker `local`): vLLM and Dynamo servers started from local recipes, real
AIPerf runs. A fake server appears only for fault injection (500s, mid-stream disconnects, everything failing).

Skipped with the reason until scripts/install-servers has made .venvs/serve and .venvs/aiperf."""

import json
import shutil
import socket
import sys
from pathlib import Path

import httpx
import pytest

from servebench.cluster import AllocationRequest, ProcessDied
from servebench.cluster.local import LocalBackend
from servebench.matrix import Point
from servebench.measure import measure
from servebench.models import ensure_model
from servebench.catalog import Catalog
from servebench.result import file_problems, parse
from servebench.result import problems as validate
from servebench.server import deploy
from servebench.server.placement import free_ports, placement_for
from servebench.server.plan import Engine, ProcSpec, ServerPlan, plan
from servebench.verdict import judge
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


def start(prof, tmp_path, model, ports=None, recipe_plan=None):
    alloc = LocalBackend().allocate(AllocationRequest(f"live-{prof.name}", prof.recipe.resources.total_nodes,
                                                      workdir=tmp_path))
    where = placement_for(prof, alloc.nodes, alloc.addresses(), str(tmp_path), root=str(REPO),
                          model_dir=str(model), ports=ports or free_ports(1, start=3000))
    try:
        return deploy.start(prof, recipe_plan or plan(prof, where), alloc, tmp_path / "logs", tokenizer_dir=model)
    except BaseException:
        alloc.release()
        raise


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
    finally:
        if kind == "dynamo":
            dep.allocation.release()


def test_real_aiperf_point_on_real_server(catalog, vllm_server, tmp_path):
    prof = profile(catalog, "vllm")
    status: list[str] = []
    out = measure(Point(prof, 2), vllm_server, run_id="live", results_dir=tmp_path, aiperf_bin=str(AIPERF),
                  tokenizer_dir=vllm_server.tokenizer_dir, progress=status.append, tick_s=2)
    r = out.result.dump()
    assert status and all(s.startswith("tiny-llama-cpu-vllm-c2: ") and " requests done, " in s and
                          s.endswith(" errors so far") for s in status), status
    assert any(not s.split(", ")[1].startswith("0 requests") for s in status), status   # counts move
    assert validate(r) == [] and file_problems(out.path) == [] and out.copy.is_file()
    assert r["run"]["aiperf_exit_code"] == 0 and r["requests"]["successful"] > 0 and r["requests"]["errors"] == 0
    assert r["output_token_ratio"] == pytest.approx(1.0, abs=0.01)
    assert r["server"]["prefix_cache_hits"] > 0      # turns of a session share their growing prefix
    assert r["requests"]["warmup_dropped"] == 2 and r["identity"]["versions"]["aiperf"] == "0.13.0"
    assert judge(parse(r), prof).failures == []


def test_server_dying_at_startup_fails_with_its_log_tail(catalog, tiny_model, tmp_path):
    prof = profile(catalog, "vllm")
    where = placement_for(prof, ["local0"], ["127.0.0.1"], str(tmp_path), root=str(REPO),
                          model_dir=str(tiny_model), ports=free_ports(1, start=3000))
    sp = plan(prof, where)
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
        r = measure(Point(prof, 2), dep, run_id="faults", results_dir=tmp_path, aiperf_bin=str(AIPERF),
                    tokenizer_dir=tiny_model).result.dump()
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
        out = measure(Point(prof, 2), dep, run_id="allfail", results_dir=tmp_path, aiperf_bin=str(AIPERF),
                      tokenizer_dir=tiny_model)
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
    return subprocess.run([sys.executable, "-m", "servebench", *args], cwd=REPO, capture_output=True, text=True)


def test_real_parsers_accept_shipped_flags_and_reject_a_vllm_serve_flag_on_the_worker(installed, recipes):
    ok = run_cli("flags")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "kimi-k3-gb200-dep worker3" in ok.stdout and "REJECTED" not in ok.stdout
    edit(recipes / "local/base.yaml", "      max-num-seqs: 16\n", "      max-num-seqs: 16\n      tool-call-parser: hermes\n")
    bad = run_cli("--recipes", str(recipes), "flags", "tiny-llama-cpu-dynamo", "tiny-llama-cpu-vllm")
    assert bad.returncode == 1
    assert "tiny-llama-cpu-dynamo worker0" in bad.stdout and "unrecognized arguments: --tool-call-parser hermes" in bad.stdout
    assert any(ln.startswith("tiny-llama-cpu-vllm worker0") and ln.endswith(" ok") for ln in bad.stdout.splitlines())


def test_pinned_flag_table_matches_the_installed_parsers(installed, tmp_path):
    import subprocess
    out = tmp_path / "table.json"
    subprocess.run([str(SERVE_PY), str(REPO / "servebench/tools/flag_table.py"), "--out", str(out)], check=True,
                   capture_output=True)
    fresh = json.loads(out.read_text())
    pinned = json.loads((REPO / "servebench/data/flags/dynamo-1.6.1_vllm-0.31.0.json").read_text())
    assert fresh["versions"] == pinned["versions"] and fresh["entrypoints"] == pinned["entrypoints"]
