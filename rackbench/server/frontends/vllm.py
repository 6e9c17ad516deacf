"""``frontend.type: vllm``: ``vllm serve`` on every node, whose rank-0 process is the API server (one worker only);
ready when its ``/health`` answers 200 and ``/v1/models`` lists the served name and the deployment's own second name
(``rackbench-<job>-<profile>``: a server of another deployment on the same port lacks it); its ``/version`` says
the release."""

from __future__ import annotations

from rackbench.server.frontends.base import Frontend, WorkerLaunch
from rackbench.server.readiness import listed_models, models_listed


class VllmFrontend(Frontend):
    name = "vllm"
    seed_framework = "vllm"
    worker_entrypoint = "vllm serve"
    entrypoints = {"vllm serve": "vllm"}
    components = ("vllm",)
    titles = {"vllm serve": "vLLM's OpenAI server (vllm serve)"}
    many_workers = False
    worker_is_vllm_serve = True

    def worker(self, profile, where, role, host, api, ports) -> WorkerLaunch:
        head = where.head
        argv = [*where.vllm_serve, "--model", where.model, "--served-model-name", profile.served_model_name,
                self.alias(profile, where)]     # vLLM answers to both; responses and metrics carry the first
        health = None
        if role.rank == 0:
            argv += ["--host", head, "--port", str(api)]      # the node's address: loopback on this machine
            health = f"http://{head}:{api}/health"
        return WorkerLaunch(tuple(argv), {}, health, f"http://{head}:{api}/metrics")

    def alias(self, profile, where) -> str:
        return f"rackbench-{where.job_id}-{profile.id}"

    def interpret(self, plan, answers) -> str | None:
        for url in plan.health_urls:
            code, body = answers[url]
            if code != 200:
                return f"{url} answered {code} {str(body)[:120]}"
        waiting = models_listed(plan, answers)
        if waiting is None and plan.alias and plan.alias not in listed_models(answers[f"{plan.api_url}/v1/models"][1]):
            return (f"{plan.api_url} serves {plan.model_name!r} but not this deployment's own name {plan.alias!r}: "
                    "another deployment's server answers on this port")
        return waiting

    def reported_versions(self, plan, get) -> dict[str, str]:
        code, body = get(f"{plan.api_url}/version")
        if code == 200 and isinstance(body, dict) and body.get("version"):
            return {"vllm": str(body["version"])}
        return {}
