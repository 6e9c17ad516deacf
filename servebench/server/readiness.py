"""Is a deployment serving? Pure interpretation of the answers of its health endpoints (no I/O here).

* **Dynamo**: every registering worker's system server says ``"status": "ready"``, the frontend's ``/health``
  lists the expected number of ``generate`` instances (it answers "healthy" with zero workers), and
  ``/v1/models`` lists the model;
* **vLLM**: ``/health`` answers 200 and ``/v1/models`` lists the served model name.

:func:`urls` says what to fetch; :func:`interpret` reads the answers (``url -> (status code, body)``, body parsed
JSON or text; status 0 when the request failed) and returns None when the deployment serves, else what it is
still waiting for. Tests feed it recorded bodies.
"""

from __future__ import annotations

from servebench.server.plan import ServerPlan

Answer = tuple[int, object]


def urls(plan: ServerPlan) -> list[str]:
    extra = [f"{plan.api_url}/health"] if plan.kind == "dynamo" else []
    return [*plan.health_urls, *extra, f"{plan.api_url}/v1/models"]


def generate_instances(body: object) -> int:
    """How many ``generate`` endpoints the Dynamo frontend's /health lists (one per registered engine group)."""
    instances = body.get("instances", []) if isinstance(body, dict) else []
    return sum(1 for i in instances if isinstance(i, dict) and i.get("endpoint") == "generate")


def listed_models(body: object) -> list[str]:
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        return [m.get("id") for m in body["data"] if isinstance(m, dict)]
    return []


def interpret(plan: ServerPlan, answers: dict[str, Answer]) -> str | None:
    missing = [u for u in urls(plan) if u not in answers]
    if missing:
        return f"no answer from {missing[0]} yet"
    for url in plan.health_urls:
        code, body = answers[url]
        if plan.kind == "dynamo":
            if not (code == 200 and isinstance(body, dict) and body.get("status") == "ready"):
                return f"worker {url} not ready ({code} {str(body)[:120]})"
        elif code != 200:
            return f"{url} answered {code} {str(body)[:120]}"
    if plan.kind == "dynamo":
        listed = generate_instances(answers[f"{plan.api_url}/health"][1])
        if listed < plan.expected_instances:
            return f"frontend lists {listed} of {plan.expected_instances} generate instance(s)"
    code, body = answers[f"{plan.api_url}/v1/models"]
    if plan.model_name not in listed_models(body):
        return f"/v1/models does not list {plan.model_name!r} yet ({code} {str(body)[:120]})"
    return None
