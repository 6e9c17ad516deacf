"""``frontend.type: vllm``: ``vllm serve`` on every node, whose rank-0 process is the API server (one worker only);
ready when its ``/health`` answers 200 and ``/v1/models`` lists the served name; its ``/version`` says the release."""

from __future__ import annotations

from servebench.server.frontends.base import Frontend, WorkerLaunch
from servebench.server.readiness import models_listed


class VllmFrontend(Frontend):
    name = "vllm"
    worker_entrypoint = "vllm serve"
    entrypoints = {"vllm serve": "vllm"}
    components = ("vllm",)
    titles = {"vllm serve": "vLLM's OpenAI server (vllm serve)"}
    many_workers = False
    worker_is_vllm_serve = True

    def worker(self, profile, where, role, host, api, ports) -> WorkerLaunch:
        head = where.head
        argv = [*where.vllm_serve, "--model", where.model, "--served-model-name", profile.served_model_name]
        health = None
        if role.rank == 0:
            argv += ["--host", head, "--port", str(api)]      # the node's address: loopback on this machine
            health = f"http://{head}:{api}/health"
        return WorkerLaunch(tuple(argv), {}, health, f"http://{head}:{api}/metrics")

    def interpret(self, plan, answers) -> str | None:
        for url in plan.health_urls:
            code, body = answers[url]
            if code != 200:
                return f"{url} answered {code} {str(body)[:120]}"
        return models_listed(plan, answers)

    def reported_versions(self, plan, get) -> dict[str, str]:
        code, body = get(f"{plan.api_url}/version")
        if code == 200 and isinstance(body, dict) and body.get("version"):
            return {"vllm": str(body["version"])}
        return {}
