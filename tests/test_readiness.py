"""Readiness interpretation (pure) on recorded health bodies: the 4-engine DEP16 deployment that has never
run here must wait for all four `generate` instances and all four worker health endpoints."""

import copy
import json
from pathlib import Path

import pytest

from rackbench.server import readiness
from rackbench.server.assembly import dry_placement
from rackbench.server.plan import plan
from tests.conftest import by_id

REC = Path(__file__).parent / "data" / "dynamo-health"
WORKER = json.loads((REC / "worker-ready.json").read_text())
FRONTEND_1 = json.loads((REC / "frontend-health-1-worker.json").read_text())
MODELS = json.loads((REC / "models.json").read_text())


def frontend_with(workers: int) -> dict:
    """The recorded frontend body with the recorded worker's instances repeated for ``workers`` workers."""
    body = copy.deepcopy(FRONTEND_1)
    one = FRONTEND_1["instances"]
    body["instances"] = [{**inst, "instance_id": inst["instance_id"] + w} for w in range(workers) for inst in one]
    return body


def models_listing(name: str) -> dict:
    body = copy.deepcopy(MODELS)
    body["data"][0]["id"] = name
    return body


def answers(sp, *, workers_ready: int, registered: int, model: str | None = None) -> dict:
    out = {}
    for i, url in enumerate(sp.health_urls):
        out[url] = (200, WORKER) if i < workers_ready else (503, "Service Unavailable")
    out[f"{sp.api_url}/health"] = (200, frontend_with(registered))
    out[f"{sp.api_url}/v1/models"] = (200, models_listing(model or sp.model_name))
    return out


@pytest.fixture
def dep16(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    return plan(prof, dry_placement(prof))


def test_recorded_single_worker_deployment_is_ready(catalog):
    prof = by_id(catalog, "tiny-llama-cpu-dynamo")
    sp = plan(prof, dry_placement(prof))
    assert readiness.generate_instances(FRONTEND_1) == 1 and sp.expected_instances == 1
    assert readiness.interpret(sp, answers(sp, workers_ready=1, registered=1, model="tiny")) is None


def test_dep16_is_ready_only_with_all_four_engines(dep16):
    assert len(dep16.health_urls) == 4 and dep16.expected_instances == 4
    assert readiness.interpret(dep16, answers(dep16, workers_ready=4, registered=4)) is None
    waiting = readiness.interpret(dep16, answers(dep16, workers_ready=4, registered=3))
    assert waiting == "frontend lists 3 of 4 generate instance(s)"
    waiting = readiness.interpret(dep16, answers(dep16, workers_ready=3, registered=4))
    assert waiting.startswith(f"worker {dep16.health_urls[3]} not ready (503")


def test_healthy_frontend_with_zero_workers_is_not_ready(dep16):
    """Dynamo's frontend says "healthy" with no worker at all (reference: dynamo.md, Health)."""
    got = answers(dep16, workers_ready=4, registered=0)
    got[f"{dep16.api_url}/health"] = (200, {"status": "healthy", "endpoints": [], "instances": []})
    assert readiness.interpret(dep16, got) == "frontend lists 0 of 4 generate instance(s)"


def test_model_must_be_listed_and_every_url_answered(dep16):
    got = answers(dep16, workers_ready=4, registered=4, model="another-model")
    assert "does not list 'moonshotai/Kimi-K3'" in readiness.interpret(dep16, got)
    got = answers(dep16, workers_ready=4, registered=4)
    del got[dep16.health_urls[0]]
    assert readiness.interpret(dep16, got).startswith("no answer from")
    got = answers(dep16, workers_ready=4, registered=4)
    got[dep16.health_urls[2]] = (0, "ConnectError: connection refused")
    assert "not ready (0 ConnectError" in readiness.interpret(dep16, got)


def test_vllm_serve_readiness(catalog):
    prof = by_id(catalog, "tiny-llama-cpu-vllm")
    sp = plan(prof, dry_placement(prof))
    assert readiness.urls(sp) == [*sp.health_urls, f"{sp.api_url}/v1/models"]
    both = models_listing(sp.model_name)
    both["data"].append({**both["data"][0], "id": sp.alias})        # vLLM lists each --served-model-name
    ok = {sp.health_urls[0]: (200, ""), f"{sp.api_url}/v1/models": (200, both)}
    assert readiness.interpret(sp, ok) is None
    assert readiness.interpret(sp, {**ok, sp.health_urls[0]: (503, "")}).endswith("answered 503 ")
    # another deployment's vLLM on this port serves the same model, never this deployment's own name
    other = {**ok, f"{sp.api_url}/v1/models": (200, models_listing(sp.model_name))}
    assert readiness.interpret(sp, other) == (f"{sp.api_url} serves 'tiny' but not this deployment's own name "
                                              f"{sp.alias!r}: another deployment's server answers on this port")
    worker = sp.proc("worker0").argv
    names = worker[worker.index("--served-model-name") + 1:worker.index("--served-model-name") + 3]
    assert names == ("tiny", "rackbench-RUN-tiny-llama-cpu-vllm") == (sp.model_name, sp.alias)
