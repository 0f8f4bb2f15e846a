"""The agent turn: a Lambda durable function, one execution per turn, named by the run id.
Thin: the loop lives in ``openagents.agent`` (``durable.run_turn`` drives its steps).

``make_handler(loop)`` builds the same handler around a given loop: the one-machine runtime
(``openagents.local.agent_runtime``) resolves it by name and runs it on the SDK's local runtime.
Around the durable handler, as around every entry point: Powertools JSON logs with the run id
as the correlation id, one ``invocation`` line per invocation (its durable status: ``PENDING``
until the turn ends), the tracer when tracing is on, and the business metrics the turn counted
(``AgentTurnStarted`` is the API's; ``AgentTurn<Status>``, steps and tokens are counted by the
``finalize`` step) flushed at the end of each invocation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration
from aws_durable_execution_sdk_python.exceptions import DurableExecutionsError, StepError
from aws_lambda_powertools import Logger, Metrics
from openagents.agent.durable import run_turn
from openagents.agent.loop import AgentLoop
from openagents.composition import LazyContainer, build
from openagents.observability import NAMESPACE, PowertoolsMetricsSink, traced

SERVICE = "openagents-agent"
Handler = Callable[[Any, Any], Any]


def engine_error(error: Exception) -> bool:
    """The durable SDK's own failures (a checkpoint, an invocation: the SDK retries the
    invocation), except a step that failed after its retries (the turn ends ``failed``)."""
    return isinstance(error, DurableExecutionsError) and not isinstance(error, StepError)


def make_handler(loop: Callable[[], AgentLoop], metrics: Metrics | None = None) -> Handler:
    logger = Logger(service=SERVICE)
    flush = metrics or Metrics(namespace=NAMESPACE, service=SERVICE)

    @durable_execution
    def turn(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
        logger.set_correlation_id(str(event.get("runId", "")) or None)

        def wait(seconds: int, name: str) -> None:  # durable: the invocation ends meanwhile
            context.wait(Duration.from_seconds(seconds), name=name)

        return run_turn(event, context, loop(), engine_error=engine_error, wait=wait)

    @logger.inject_lambda_context(clear_state=True)
    @flush.log_metrics
    @traced(SERVICE)
    def handler(event: dict[str, Any], context: Any) -> Any:
        output = turn(event, context)
        status = output.get("Status") if isinstance(output, dict) else None
        logger.info("invocation", extra={"durableStatus": status})
        return output

    return handler


_metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
runtime = LazyContainer(lambda settings: build(settings, PowertoolsMetricsSink(_metrics)))
lambda_handler = make_handler(lambda: runtime.get().agent_loop, _metrics)
