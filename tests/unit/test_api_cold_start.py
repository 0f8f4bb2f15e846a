"""The handlers' cold-start cuts (functions/api/handler.py), in fresh interpreters: the
collector is on again once a handler module is imported, what the import built is frozen; the
API never imported pydantic.v1 and still validates a request body and answers. The module's two
interpreters start together (each test waits for its own); neither imports ``tests.support``
(httpx, uvicorn, moto: as long again as the handler): the events and the Lambda context's fields
come from it here, as JSON."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import answer, apigw_event, interpreters, lambda_context_fields

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import gc, json, sys, types
import functions.api.handler as handler

given = json.loads(sys.argv[1])  # the events, and tests.support.LambdaContext's fields
remaining = given["context"].pop("remaining_time_in_millis")


def context():
    fields = {**given["context"], "get_remaining_time_in_millis": lambda: remaining}
    return types.SimpleNamespace(**fields)


refused = handler.lambda_handler(given["refused"], context())
health = handler.lambda_handler(given["health"], context())
print(json.dumps({
    "enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "v1": sys.modules.get("pydantic.v1", "missing") is None,
    "health": health["statusCode"],
    "refused": refused["statusCode"],
    "catalog": "openagents.events.catalog" in sys.modules,  # the event models: first publish
}))
"""


ENV = {
    **os.environ,
    "OPENAGENTS_MODE": "aws",
    "OPENAGENTS_TABLE_NAME": "cold-start",
    "OPENAGENTS_ARTIFACT_BUCKET": "cold-start",
    "OPENAGENTS_PROVISION_ON_CREATE": "false",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "AWS_DEFAULT_REGION": "us-east-1",
}
TASKS = """
import gc, importlib, json, sys
seen = {}
for name in ("lifecycle", "provisioner", "archiver"):
    module = importlib.import_module(f"functions.{name}.handler")
    seen[name] = {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
    module.runtime.get()  # the first step's container, with the collector on
    seen[name]["agent"] = "openagents.agent.loop" in sys.modules  # the agent: its first use
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def started() -> Iterator[dict[str, subprocess.Popen[str]]]:
    """Both cases' fresh interpreters, started at once."""
    claims = {"sub": "alice", "username": "alice"}
    body = json.dumps({"title": 7}).encode()  # not a string: the body model refuses it
    given = {
        "context": lambda_context_fields(),
        "refused": apigw_event("POST", "/api/sessions", claims=claims, body=body),
        "health": apigw_event("GET", "/api/health", claims=None),
    }
    cases = {"api": ([SCRIPT, json.dumps(given)], ENV), "tasks": ([TASKS], ENV)}
    with interpreters(cases, ROOT) as running:
        yield running


def test_the_api_imports_with_the_collector_paused_and_without_pydantic_v1(
    started: dict[str, subprocess.Popen[str]],
) -> None:
    seen = answer(started, "api")
    assert seen["enabled"] is True
    assert seen["frozen"] > 10_000  # the app's objects, out of later collections
    assert seen["v1"] is True  # marked absent, never imported
    assert seen["health"] == 200
    assert seen["refused"] == 422
    assert seen["catalog"] is False  # the API publishes no event: the table's stream does


def test_each_task_function_imports_with_the_collector_paused_and_builds_no_agent(
    started: dict[str, subprocess.Popen[str]],
) -> None:
    seen = answer(started, "tasks")
    assert set(seen) == {"lifecycle", "provisioner", "archiver"}
    for name, state in seen.items():
        assert state["enabled"] is True, name
        assert state["frozen"] > 10_000, name
        assert state["agent"] is False, name  # a task function never builds the agent


def _api_routes() -> list[Any]:
    from fastapi.routing import APIRoute
    from openagents.settings import Settings

    from functions.api.app import create_app

    return [r for r in create_app(Settings).router.routes if isinstance(r, APIRoute)]


def test_every_route_analysed_on_first_use_holds_what_an_apiroute_holds() -> None:
    from fastapi.routing import APIRoute

    from functions.api.lazy_route import DEFERRED, AnalysedRoute

    served = [r for r in _api_routes() if isinstance(r, AnalysedRoute)]
    assert len(served) > 50  # every route module's routes
    own = {"_analysis", "_pending", "_made"}
    # the app's routes may have served requests of earlier tests (a route module's routes are
    # the process's): each is made again as it was made, then compared with an APIRoute
    for made in (route.__dict__["_made"] for route in served):
        path, endpoint, options = made
        route = AnalysedRoute(path, endpoint, **options)
        eager = APIRoute(path, endpoint, **options)
        before = set(vars(route)) - own
        assert set(vars(eager)) - before <= DEFERRED, route.path  # all computed on first use
        for name in before:
            assert getattr(route, name) == getattr(eager, name), (route.path, name)
        assert getattr(route, "original_router", None) is None  # no analysis for a stranger
        assert route.__dict__["_pending"] is True
        assert route.unique_id == eager.unique_id  # a deferred attribute: analysed now
        assert route.__dict__["_pending"] is False
        assert set(vars(route)) - own == set(vars(eager)), route.path
        for name in ("response_model", "status_code", "responses", "description", "methods"):
            assert getattr(route, name) == getattr(eager, name), (route.path, name)
        assert (route.body_field is None) == (eager.body_field is None), route.path
        assert len(route.dependant.dependencies) == len(eager.dependant.dependencies)


def test_a_route_is_analysed_once_when_threads_read_it_together() -> None:
    import threading

    from fastapi import APIRouter

    from functions.api.lazy_route import AnalysedRoute

    router = APIRouter(route_class=AnalysedRoute)

    @router.get("/items/{item_id}")
    def item(item_id: int) -> dict[str, int]:
        return {"id": item_id}

    route = router.routes[0]
    assert isinstance(route, AnalysedRoute)
    seen: list[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(route.dependant)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8
    assert all(d is seen[0] for d in seen)  # one analysis, seen by all
    assert [p.name for p in route.dependant.path_params] == ["item_id"]
