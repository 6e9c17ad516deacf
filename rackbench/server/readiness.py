"""Is a deployment serving? Pure interpretation of the answers of its health endpoints (no I/O here); what counts
is the frontend's (rackbench.server.frontends):

* **Dynamo**: every registering worker's system server says ``"status": "ready"``, the frontend's ``/health``
  lists the expected number of ``generate`` instances (it answers "healthy" with zero workers), and
  ``/v1/models`` lists the model;
* **vLLM**: ``/health`` answers 200 and ``/v1/models`` lists the served model name.

:func:`urls` says what to fetch; :func:`interpret` reads the answers (``url -> (status code, body)``, body parsed
JSON or text; status 0 when the request failed) and returns None when the deployment serves, else what it is
still waiting for. Tests feed it recorded bodies.
"""

from __future__ import annotations

from rackbench.server.plan import ServerPlan

Answer = tuple[int, object]


def urls(plan: ServerPlan) -> list[str]:
    return plan.frontend.readiness_urls(plan)


def generate_instances(body: object) -> int:
    """How many ``generate`` endpoints the Dynamo frontend's /health lists (one per registered engine group)."""
    instances = body.get("instances", []) if isinstance(body, dict) else []
    return sum(1 for i in instances if isinstance(i, dict) and i.get("endpoint") == "generate")


def listed_models(body: object) -> list[str]:
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        return [m.get("id") for m in body["data"] if isinstance(m, dict)]
    return []


def models_listed(plan: ServerPlan, answers: dict[str, Answer]) -> str | None:
    """None when ``/v1/models`` lists the plan's served name, else what it says instead."""
    code, body = answers[f"{plan.api_url}/v1/models"]
    if plan.model_name not in listed_models(body):
        return f"/v1/models does not list {plan.model_name!r} yet ({code} {str(body)[:120]})"
    return None


def interpret(plan: ServerPlan, answers: dict[str, Answer]) -> str | None:
    missing = [u for u in urls(plan) if u not in answers]
    if missing:
        return f"no answer from {missing[0]} yet"
    return plan.frontend.interpret(plan, answers)
