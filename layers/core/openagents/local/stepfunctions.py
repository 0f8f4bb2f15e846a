"""Step Functions on one machine: moto's ASL interpreter runs the very ASL files the CDK app
deploys; its Lambda tasks are routed to the project's handlers, in process, by handler string.

Four of moto's internals are patched (moto is pinned, ``moto==5.2.5``;
``tests/integration/test_local_stepfunctions.py`` fails loudly if one moves):

- ``LambdaSimpleBackend.invoke``: a Lambda invoke that reaches the moto server runs our handler;
- the interpreter's Lambda task (``lambda_eval_utils._invoke_lambda_function``) calls our handler
  directly, with the response the invoke would have given: moto's own path built a boto3 client
  for every task (~a third of a task's CPU) and sent it over HTTP to the moto server, which
  held a request thread for the task's length;
- ``ExecutionWorker._get_evaluation_entrypoint`` parses each definition once, not once per
  execution (the parsed program is immutable: an execution's state lives in its environment);
- ``Program.eval`` runs the states on the execution's own thread when the definition sets no
  ``TimeoutSeconds`` (moto starts a second thread only to time it out, so every waiting
  execution held two), and drops finished threads from moto's ``TMP_THREADS`` (a list nothing
  reads that kept every thread ever started), and, when the last running execution ends,
  hands the allocator's free pages back to the system (glibc's ``malloc_trim``: after a peak
  of execution threads their arenas keep tens of MiB freed but resident).

Measured in docs/benchmarks.md ("Hibernation on time", issue 26).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib
import json
import logging
import os
import threading
import traceback
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.stepfunctions.parser import utils as moto_sfn_utils
from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

from openagents.local.lambda_context import LocalLambdaContext
from openagents.workflows import catalog

log = logging.getLogger(__name__)
ACCOUNT = "123456789012"
FUNCTION_PREFIX = "openagents-"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    ],
}
EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18

_routes: dict[str, str] = {}  # moto function name -> handler string (process-wide, like the patch)
_patch_lock = threading.Lock()
_original_invoke = LambdaSimpleBackend.invoke
_original_lambda_task = lambda_eval_utils._invoke_lambda_function
_original_entrypoint = ExecutionWorker._get_evaluation_entrypoint
_original_program_eval = Program.eval


def resolve(handler: str) -> Callable[[Any, Any], Any]:
    module, _, name = handler.rpartition(".")
    function: Callable[[Any, Any], Any] = getattr(importlib.import_module(module), name)
    return function


def _invoke(
    self: LambdaSimpleBackend,
    function_name: str,
    qualifier: str | None,
    body: Any,
    headers: Any,
    response_headers: dict[str, str],
) -> bytes:
    name = function_name.split(":")[-1]
    handler = _routes.get(name)
    if handler is None:
        result = _original_invoke(self, function_name, qualifier, body, headers, response_headers)
        return result if isinstance(result, bytes) else str(result or "").encode()
    output, failed = _run(name, handler, json.loads(body or "null"))
    if failed:
        response_headers["x-amz-function-error"] = "Unhandled"
    return output


def _run(name: str, handler: str, event: Any) -> tuple[bytes, bool]:
    """The handler's output as the JSON Lambda returns, or Lambda's error shape and True."""
    try:
        output = resolve(handler)(event, LocalLambdaContext(function_name=name))
    except Exception as exc:  # a function error, as Lambda reports it to Step Functions
        log.warning("task %s failed: %s", name, exc)
        error = {
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
            "stackTrace": traceback.format_exception(exc)[-3:],
        }
        return json.dumps(error).encode(), True
    return json.dumps(output).encode(), False


def _lambda_task(parameters: dict[str, Any], region: str, state_credentials: Any) -> Any:
    """The interpreter's ``lambda:invoke`` task, in process for a routed function: what
    ``lambda_client.invoke`` answers (status 200, ``FunctionError`` when the handler raised),
    with the payload through JSON as it would have come over the wire."""
    name = str(parameters.get("FunctionName", "")).split(":")[-1]
    handler = _routes.get(name)
    if handler is None:
        return _original_lambda_task(parameters, region, state_credentials)
    output, failed = _run(name, handler, json.loads(parameters.get("Payload") or b"null"))
    response: dict[str, Any] = {
        "StatusCode": 200,
        "ExecutedVersion": "$LATEST",
        "Payload": json.loads(output),
    }
    if failed:
        response["FunctionError"] = "Unhandled"
    return response


@functools.lru_cache(maxsize=16)
def _parsed(definition: str) -> Any:
    return AmazonStateLanguageParser.parse(definition)[0]


def _entrypoint(self: ExecutionWorker) -> Any:
    return _parsed(self._evaluation_details.state_machine_details.definition)


def _program_eval(self: Program, env: Any) -> None:
    if self.timeout_seconds is not None:
        _original_program_eval(self, env)
    else:  # what moto's watchdog thread runs, on this thread
        env.next_state_name = self.start_at.start_at_name
        EvalComponent.eval(self, env)
    threads: list[threading.Thread] = moto_sfn_utils.TMP_THREADS
    threads[:] = [thread for thread in threads if thread.is_alive()]
    if all(thread is threading.current_thread() for thread in threads):
        release_free_memory()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    trim: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)
    return trim


def release_free_memory() -> bool:
    """glibc keeps what threads freed in their arenas, resident; ``malloc_trim(0)`` returns the
    free pages (a few ms). False where the C library has no ``malloc_trim`` (not glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def patch_moto_lambda() -> None:
    with _patch_lock:
        if LambdaSimpleBackend.invoke is not _invoke:
            LambdaSimpleBackend.invoke = _invoke  # type: ignore[method-assign]
        lambda_eval_utils._invoke_lambda_function = _lambda_task
        ExecutionWorker._get_evaluation_entrypoint = _entrypoint  # type: ignore[method-assign]
        Program.eval = _program_eval  # type: ignore[method-assign]


class LocalStepFunctions:
    """Install the catalog's functions and state machines into a moto server."""

    def __init__(self, endpoint: str, region: str, statemachines_dir: Path) -> None:
        self._endpoint = endpoint
        self._region = region
        self._dir = statemachines_dir

    def _client(self, service: str) -> Any:
        client: Any = boto3.client(  # type: ignore[call-overload]
            service, endpoint_url=self._endpoint, region_name=self._region
        )
        return client

    def install(self) -> dict[str, str]:
        """Returns the state machine ARNs by name."""
        os.environ["MOTO_PORT"] = self._endpoint.rsplit(":", 1)[1]
        config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        request = urllib.request.Request(  # noqa: S310 - our own moto server on 127.0.0.1
            f"{self._endpoint}/moto-api/config",
            data=json.dumps(config).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310
        patch_moto_lambda()
        role = self._role()
        arns = {
            name: self._function(name, handler, role) for name, handler in catalog.FUNCTIONS.items()
        }
        sfn = self._client("stepfunctions")
        machines: dict[str, str] = {}
        for machine in catalog.STATE_MACHINES:
            text = catalog.definition_path(self._dir, machine).read_text()
            definition = json.dumps(catalog.render(text, arns))
            arn = f"arn:aws:states:{self._region}:{ACCOUNT}:stateMachine:{FUNCTION_PREFIX}{machine}"
            try:
                sfn.describe_state_machine(stateMachineArn=arn)
                sfn.update_state_machine(stateMachineArn=arn, definition=definition)
            except sfn.exceptions.StateMachineDoesNotExist:
                arn = sfn.create_state_machine(
                    name=f"{FUNCTION_PREFIX}{machine}", definition=definition, roleArn=role
                )["stateMachineArn"]
            machines[machine] = arn
        return machines

    def _role(self) -> str:
        iam = self._client("iam")
        try:
            return str(iam.get_role(RoleName="openagents-local")["Role"]["Arn"])
        except iam.exceptions.NoSuchEntityException:
            created = iam.create_role(
                RoleName="openagents-local", AssumeRolePolicyDocument=json.dumps(TRUST)
            )
            return str(created["Role"]["Arn"])

    def _function(self, name: str, handler: str, role: str) -> str:
        function_name = f"{FUNCTION_PREFIX}{name}"
        _routes[function_name] = handler
        client = self._client("lambda")
        try:
            return str(
                client.get_function(FunctionName=function_name)["Configuration"]["FunctionArn"]
            )
        except client.exceptions.ResourceNotFoundException:
            created = client.create_function(
                FunctionName=function_name,
                Runtime="python3.12",
                Role=role,
                Handler=handler,
                Code={"ZipFile": EMPTY_ZIP},
            )
            return str(created["FunctionArn"])
