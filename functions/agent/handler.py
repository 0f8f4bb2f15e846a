"""The agent turn: a Lambda durable function, one execution per turn, named by the run id.
Thin: the loop lives in ``openagents.agent`` (``durable.run_turn`` drives its steps).

``make_handler(loop)`` builds the same handler around a given loop: the one-machine runtime
(``openagents.local.agent_runtime``) resolves it by name and runs it on the SDK's local runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_lambda_powertools import Metrics
from openagents.agent.durable import run_turn
from openagents.agent.loop import AgentLoop
from openagents.composition import LazyContainer, build
from openagents.observability import NAMESPACE, PowertoolsMetricsSink

Handler = Callable[[Any, Any], Any]


def make_handler(loop: Callable[[], AgentLoop]) -> Handler:
    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
        return run_turn(event, context, loop())

    return handler


_metrics = Metrics(namespace=NAMESPACE, service="openagents-agent")
runtime = LazyContainer(lambda settings: build(settings, PowertoolsMetricsSink(_metrics)))
lambda_handler = make_handler(lambda: runtime.get().agent_loop)
