"""The handlers' tracer (``openagents.observability.traced``): with tracing on, Powertools'
Tracer records the handler's subsegment as before; with it off, the X-Ray SDK is never imported.
Each case runs in a fresh interpreter: the X-Ray recorder and Powertools' Tracer configuration
are process-wide, and whether the SDK was imported is the point. The module's interpreters start
together (each test waits for its own), and none imports ``tests.support`` (httpx, uvicorn, moto:
as long again as the handlers): the Lambda context is made from the fields it is given."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from openagents.observability import traced

from tests.support import answer, interpreters, lambda_context_fields

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "1-5759e988-bd862e3fe1be46a994272793"
ON_LAMBDA = {
    "LAMBDA_TASK_ROOT": str(ROOT),
    "POWERTOOLS_TRACE_DISABLED": "0",
    "_X_AMZN_TRACE_ID": f"Root={TRACE_ID};Parent=53995c3f42cd8ad8;Sampled=1",
}
TRACED = """
import json, sys, types
from aws_xray_sdk.core import xray_recorder

sent = []

class Capture:  # the recorder's emitter, in place of the UDP one to the X-Ray daemon
    def send_entity(self, entity):
        sent.append(json.loads(entity.serialize()))

    def set_daemon_address(self, address):
        pass

xray_recorder.configure(emitter=Capture())
from functions.outbox.handler import lambda_handler

fields = json.loads(sys.argv[1])  # tests.support.LambdaContext's, and its remaining time
remaining = fields.pop("remaining_time_in_millis")
context = types.SimpleNamespace(**fields, get_remaining_time_in_millis=lambda: remaining)
assert lambda_handler([], context) == []
print(json.dumps(sent))
"""
UNTRACED = """
import json, sys
import functions.api.handler, functions.lifecycle.handler, functions.outbox.handler
print(json.dumps(sorted(name for name in sys.modules if name.startswith("aws_xray_sdk"))))
"""


CASES = {  # each test's script and environment
    "traced": (TRACED, ON_LAMBDA),
    "off": (UNTRACED, {"POWERTOOLS_TRACE_DISABLED": "1"}),
    "outside": (UNTRACED, {k: v for k, v in ON_LAMBDA.items() if k != "LAMBDA_TASK_ROOT"}),
}


@pytest.fixture(scope="module")
def started() -> Iterator[dict[str, subprocess.Popen[str]]]:
    """Every case's fresh interpreter, started at once."""
    base = {k: v for k, v in os.environ.items() if k != "LAMBDA_TASK_ROOT"}
    fields = json.dumps(lambda_context_fields())
    cases = {
        name: ([script, fields], {**base, "POWERTOOLS_LOG_LEVEL": "WARNING", **env})
        for name, (script, env) in CASES.items()
    }
    with interpreters(cases, ROOT) as running:
        yield running


def test_tracing_on_records_the_handler_subsegment_with_its_annotations(
    started: dict[str, subprocess.Popen[str]],
) -> None:
    [subsegment] = answer(started, "traced")
    assert subsegment["name"] == "## lambda_handler"
    assert subsegment["trace_id"] == TRACE_ID
    assert subsegment["annotations"] == {"ColdStart": True, "Service": "openagents-outbox"}


def test_tracing_off_never_imports_the_xray_sdk(
    started: dict[str, subprocess.Popen[str]],
) -> None:
    assert answer(started, "off") == []


def test_outside_lambda_tracing_is_off_as_powertools_decides(
    started: dict[str, subprocess.Popen[str]],
) -> None:
    assert answer(started, "outside") == []


def test_a_disabled_tracer_hands_the_handler_back_unwrapped() -> None:
    def handler(event: object, context: object) -> str:
        return "answered"

    assert traced("openagents-test")(handler) is handler  # tests run with tracing off
