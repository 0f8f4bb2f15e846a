"""The handlers' cold-start cuts (functions/api/handler.py), in fresh interpreters: the
collector is on again once a handler module is imported, what the import built is frozen; the
API never imported pydantic.v1 and still validates a request body and answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import gc, json, sys
import functions.api.handler as handler
from tests.support import LambdaContext, apigw_event

claims = {"sub": "alice", "username": "alice"}
body = json.dumps({"title": 7}).encode()  # not a string: the body model refuses it
refused = handler.lambda_handler(
    apigw_event("POST", "/api/sessions", claims=claims, body=body), LambdaContext())
health = handler.lambda_handler(apigw_event("GET", "/api/health", claims=None), LambdaContext())
print(json.dumps({
    "enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "v1": sys.modules.get("pydantic.v1", "missing") is None,
    "health": health["statusCode"],
    "refused": refused["statusCode"],
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
import gc, importlib, json
seen = {}
for name in ("lifecycle", "provisioner", "archiver"):
    module = importlib.import_module(f"functions.{name}.handler")
    seen[name] = {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
    module.runtime.get()  # the first step's container, with the collector on
print(json.dumps(seen))
"""


def _run(script: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_api_imports_with_the_collector_paused_and_without_pydantic_v1() -> None:
    seen = _run(SCRIPT)
    assert seen["enabled"] is True
    assert seen["frozen"] > 10_000  # the app's objects, out of later collections
    assert seen["v1"] is True  # marked absent, never imported
    assert seen["health"] == 200
    assert seen["refused"] == 422


def test_each_task_function_imports_with_the_collector_paused() -> None:
    seen = _run(TASKS)
    assert set(seen) == {"lifecycle", "provisioner", "archiver"}
    for name, state in seen.items():
        assert state["enabled"] is True, name
        assert state["frozen"] > 10_000, name
