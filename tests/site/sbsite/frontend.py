"""``sitevllm``: vLLM's own server as a site wraps it, a frontend registered by entry point alone: the same processes
as rackbench's ``vllm`` frontend, each tagged with the site's environment variable, and ready only once the
server also reports its version (what a site's gateway might require)."""

from rackbench.server.frontends.base import WorkerLaunch
from rackbench.server.frontends.vllm import VllmFrontend


class SiteFrontend(VllmFrontend):
    name = "sitevllm"

    def worker(self, profile, where, role, host, api, ports) -> WorkerLaunch:
        launch = super().worker(profile, where, role, host, api, ports)
        return WorkerLaunch(launch.argv, {**launch.env, "SITE_FRONTEND": self.name}, launch.health, launch.metrics)

    def readiness_urls(self, plan) -> list[str]:
        return [*super().readiness_urls(plan), f"{plan.api_url}/version"]

    def interpret(self, plan, answers):
        code, _ = answers[f"{plan.api_url}/version"]
        return super().interpret(plan, answers) or (None if code == 200 else f"/version answered {code}")
