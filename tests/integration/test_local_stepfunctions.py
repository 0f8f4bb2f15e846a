"""The one-machine Step Functions (openagents/local/stepfunctions.py) on moto's interpreter: the
real lifecycle ASL, its Lambda tasks routed to a handler of this module. A task runs in process
(no boto3 client, no HTTP hop to the moto server), answers as Lambda would (a raised error takes
the ASL's Catch with Lambda's error shape) and each definition is parsed once. moto is pinned;
if one of the patched internals moves, the first test fails."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.stepfunctions.parser import utils as moto_sfn_utils
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.utils import boto_client
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from openagents.local import stepfunctions

ROOT = Path(__file__).resolve().parents[2]
CALLS: list[dict[str, Any]] = []


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The lifecycle function's contract: claim -> wait 0 s, evaluate -> hibernate (or fail
    for a session named "broken"), hibernate -> done, recover -> done."""
    CALLS.append(event)
    step = event["step"]
    if step == "claim":
        later = 3600 if event["sessionId"].startswith("sleepy") else 0
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + later))
        return {"action": "wait", "wakeAt": at}
    if step == "evaluate":
        if event["sessionId"] == "broken":
            raise RuntimeError("the store is gone")
        return {"action": "hibernate", "wakeAt": None}
    return {"action": "done", "wakeAt": None, "error": event.get("error")}


@pytest.fixture
def lifecycle(moto_endpoint: str) -> Iterator[tuple[Any, str]]:
    machines = stepfunctions.LocalStepFunctions(
        moto_endpoint, "us-east-1", ROOT / "infra" / "statemachines"
    ).install()
    routed = dict(stepfunctions._routes)
    stepfunctions._routes["openagents-lifecycle"] = f"{__name__}.handler"
    CALLS.clear()
    try:
        yield (
            boto3.client("stepfunctions", endpoint_url=moto_endpoint, region_name="us-east-1"),
            machines["lifecycle"],
        )
    finally:
        stepfunctions._routes.clear()
        stepfunctions._routes.update(routed)


def _finished(sfn: Any, arn: str, deadline: float = 60) -> dict[str, Any]:
    ends = time.monotonic() + deadline
    while time.monotonic() < ends:
        found: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        if found["status"] != "RUNNING":
            return found
        time.sleep(0.05)
    raise AssertionError(f"{arn} still running after {deadline} s")


def test_the_patched_internals_are_in_place(lifecycle: tuple[Any, str]) -> None:
    assert lambda_eval_utils._invoke_lambda_function is stepfunctions._lambda_task
    assert ExecutionWorker._get_evaluation_entrypoint is stepfunctions._entrypoint
    assert Program.eval is stepfunctions._program_eval


def _waiting(sfn: Any, arn: str) -> bool:
    events = sfn.get_execution_history(executionArn=arn)["events"]
    return any(e["type"] == "WaitStateEntered" for e in events)


def test_a_waiting_execution_holds_one_thread_and_still_stops(
    lifecycle: tuple[Any, str],
) -> None:
    sfn, machine = lifecycle
    before = threading.active_count()
    runs = [
        sfn.start_execution(
            stateMachineArn=machine,
            name=f"sleepy-{i}",
            input=json.dumps({"sessionId": f"sleepy-{i}", "runId": f"r{i}"}),
        )["executionArn"]
        for i in range(6)
    ]
    ends = time.monotonic() + 60
    while not all(_waiting(sfn, arn) for arn in runs):
        assert time.monotonic() < ends, "the executions never reached their Wait"
        time.sleep(0.05)
    assert threading.active_count() - before <= len(runs) + 2  # moto's own way: two each
    for arn in runs:
        sfn.stop_execution(executionArn=arn)
    assert [_finished(sfn, arn)["status"] for arn in runs] == ["ABORTED"] * len(runs)
    # moto's registry of every thread started: each execution that ends forgets the finished
    # ones, so what is left is at most the last executions' own threads (moto's way: 3+ each,
    # every one since the process started)
    assert len(moto_sfn_utils.TMP_THREADS) <= len(runs) + 1


def test_a_task_runs_in_process_and_answers_as_lambda(
    lifecycle: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sfn, machine = lifecycle

    def no_client(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a routed task built a boto3 client")

    monkeypatch.setattr(boto_client, "boto_client_for", no_client)
    monkeypatch.setattr(lambda_eval_utils, "boto_client_for", no_client)
    started = sfn.start_execution(
        stateMachineArn=machine, name="run-ok", input=json.dumps({"sessionId": "s", "runId": "r"})
    )
    done = _finished(sfn, started["executionArn"])
    assert done["status"] == "SUCCEEDED", done
    assert [c["step"] for c in CALLS] == ["claim", "evaluate", "hibernate"]
    assert json.loads(done["output"])["decision"] == {"action": "done", "wakeAt": None}


def test_a_raised_error_takes_the_catch_with_lambdas_error_shape(
    lifecycle: tuple[Any, str],
) -> None:
    sfn, machine = lifecycle
    started = sfn.start_execution(
        stateMachineArn=machine,
        name="run-broken",
        input=json.dumps({"sessionId": "broken", "runId": "r"}),
    )
    assert _finished(sfn, started["executionArn"])["status"] == "SUCCEEDED"
    [recover] = [c for c in CALLS if c["step"] == "recover"]
    assert recover["error"]["Error"] == "RuntimeError"
    assert json.loads(recover["error"]["Cause"])["errorMessage"] == "the store is gone"


def test_each_definition_is_parsed_once(
    lifecycle: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sfn, machine = lifecycle
    stepfunctions._parsed.cache_clear()
    parses: list[str] = []
    real = AmazonStateLanguageParser.parse

    def counted(definition: str) -> Any:
        parses.append(definition)
        return real(definition)

    monkeypatch.setattr(AmazonStateLanguageParser, "parse", staticmethod(counted))
    runs = [
        sfn.start_execution(
            stateMachineArn=machine,
            name=f"run-{i}",
            input=json.dumps({"sessionId": f"s{i}", "runId": f"r{i}"}),
        )["executionArn"]
        for i in range(3)
    ]
    assert [_finished(sfn, arn)["status"] for arn in runs] == ["SUCCEEDED"] * 3
    assert len(parses) == 1
    assert sorted(c["sessionId"] for c in CALLS if c["step"] == "hibernate") == ["s0", "s1", "s2"]


def test_free_memory_is_released_when_the_last_execution_ends(
    lifecycle: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sfn, machine = lifecycle
    released: list[int] = []

    def release() -> bool:
        released.append(1)
        return True

    monkeypatch.setattr(stepfunctions, "release_free_memory", release)
    arn = sfn.start_execution(
        stateMachineArn=machine, name="trim", input=json.dumps({"sessionId": "s", "runId": "r"})
    )["executionArn"]
    assert _finished(sfn, arn)["status"] == "SUCCEEDED"
    assert released  # no other execution was running
    events = sfn.get_execution_history(executionArn=arn)["events"]
    assert events[-1]["type"] == "ExecutionSucceeded"


def test_releasing_free_memory_is_safe_to_call() -> None:
    assert stepfunctions.release_free_memory() in (True, False)
