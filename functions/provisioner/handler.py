"""Lambda entry point for the provisioning workflow's tasks (one function, one step per call).

Step Functions passes ``{"step", "sessionId", "generation", ...}``; the step's result is the
task output. Errors propagate so the workflow's Retry/Catch decide.
"""

from __future__ import annotations

from typing import Any

from openagents.composition import Container
from openagents.entrypoints import task


def run_step(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    service = container.provisioning
    session_id = str(event["sessionId"])
    generation = int(event["generation"])
    step = event["step"]
    if step == "start":
        return service.start(session_id, generation)
    if step == "probe":
        return service.probe(session_id, generation, int(event.get("attempts", 0)))
    if step == "prepare":
        return service.prepare(session_id, generation)
    if step == "activate":
        return service.activate(session_id, generation)
    if step == "fail":
        return service.fail(session_id, generation, event.get("error"))
    raise ValueError(f"unknown provisioning step {step!r}")


ENTRY = task(
    "openagents-provisioner", run_step, correlation_id=lambda event: str(event.get("sessionId"))
)
lambda_handler = ENTRY.handler
runtime = ENTRY.runtime
