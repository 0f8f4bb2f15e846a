"""The handlers' tracer (``openagents.observability.traced``): with tracing on, Powertools'
Tracer records the handler's subsegment as before; with it off, the X-Ray SDK is never imported.
Each case runs in a fresh interpreter: the X-Ray recorder and Powertools' Tracer configuration
are process-wide, and whether the SDK was imported is the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from openagents.observability import traced

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "1-5759e988-bd862e3fe1be46a994272793"
ON_LAMBDA = {
    "LAMBDA_TASK_ROOT": str(ROOT),
    "POWERTOOLS_TRACE_DISABLED": "0",
    "_X_AMZN_TRACE_ID": f"Root={TRACE_ID};Parent=53995c3f42cd8ad8;Sampled=1",
}
TRACED = """
import json
from aws_xray_sdk.core import xray_recorder

sent = []

class Capture:  # the recorder's emitter, in place of the UDP one to the X-Ray daemon
    def send_entity(self, entity):
        sent.append(json.loads(entity.serialize()))

    def set_daemon_address(self, address):
        pass

xray_recorder.configure(emitter=Capture())
from functions.outbox.handler import lambda_handler
from tests.support import LambdaContext

assert lambda_handler([], LambdaContext()) == []
print(json.dumps(sent))
"""
UNTRACED = """
import json, sys
import functions.api.handler, functions.lifecycle.handler, functions.outbox.handler
print(json.dumps(sorted(name for name in sys.modules if name.startswith("aws_xray_sdk"))))
"""


def _run(script: str, env: dict[str, str]) -> Any:
    base = {k: v for k, v in os.environ.items() if k != "LAMBDA_TASK_ROOT"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**base, "POWERTOOLS_LOG_LEVEL": "WARNING", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_tracing_on_records_the_handler_subsegment_with_its_annotations() -> None:
    [subsegment] = _run(TRACED, ON_LAMBDA)
    assert subsegment["name"] == "## lambda_handler"
    assert subsegment["trace_id"] == TRACE_ID
    assert subsegment["annotations"] == {"ColdStart": True, "Service": "openagents-outbox"}


def test_tracing_off_never_imports_the_xray_sdk() -> None:
    assert _run(UNTRACED, {"POWERTOOLS_TRACE_DISABLED": "1"}) == []


def test_outside_lambda_tracing_is_off_as_powertools_decides() -> None:
    outside = {k: v for k, v in ON_LAMBDA.items() if k != "LAMBDA_TASK_ROOT"}
    assert _run(UNTRACED, outside) == []


def test_a_disabled_tracer_hands_the_handler_back_unwrapped() -> None:
    def handler(event: object, context: object) -> str:
        return "answered"

    assert traced("openagents-test")(handler) is handler  # tests run with tracing off
