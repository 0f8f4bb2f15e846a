"""The API handler's cold-start cuts (functions/api/handler.py), in a fresh interpreter: the
collector is on again once the module is imported, what the import built is frozen, pydantic.v1
was never imported, and the handler still validates a request body and answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_the_handler_imports_with_the_collector_paused_and_without_pydantic_v1() -> None:
    env = {
        **os.environ,
        "OPENAGENTS_MODE": "aws",
        "OPENAGENTS_TABLE_NAME": "cold-start",
        "OPENAGENTS_ARTIFACT_BUCKET": "cold-start",
        "OPENAGENTS_PROVISION_ON_CREATE": "false",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["enabled"] is True
    assert seen["frozen"] > 10_000  # the app's objects, out of later collections
    assert seen["v1"] is True  # marked absent, never imported
    assert seen["health"] == 200
    assert seen["refused"] == 422
