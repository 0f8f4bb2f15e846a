"""Lambda entry point for archive finalisation.

Invoked by the EventBridge rule on ``Session Archived`` events whose ``detail.finalize`` is true
(``openagents.workflows.catalog.RULES``), or by the one-machine bus running the same rule; and
by the auto-archive schedule (``{"step": "auto-archive"}``, ``catalog.SCHEDULES``). A
failure raises: EventBridge (asynchronous invocation) retries it, and the error is recorded on
the session as ``lifecycleError``. This module is where those events are parsed and the
results produced.
"""

from __future__ import annotations

import gc

# the collector off while this module imports (its passes over objects that all stay
# alive are wasted cold-start CPU), then on, with them frozen: functions/api/handler.py
gc.disable()

from typing import Any  # noqa: E402

from openagents.composition import Container  # noqa: E402
from openagents.entrypoints import task  # noqa: E402
from openagents.services.archive import AutoArchived, Finalized  # noqa: E402


def session_id_of(event: dict[str, Any]) -> str:
    """An EventBridge envelope (``detail.sessionId``) or a direct ``{"sessionId"}``."""
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else event
    session_id = (detail or {}).get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("the event names no sessionId")
    return session_id


def payload(result: Finalized | AutoArchived) -> dict[str, Any]:
    if isinstance(result, AutoArchived):
        return {"stale": result.stale, "archived": result.archived}
    if result.finalized:
        return {"finalized": True, "bundle": result.bundle}
    return {"finalized": False, "reason": result.reason}


def run(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    if event.get("step") == "auto-archive":  # the scheduled rule
        return payload(container.archive.auto_archive())
    return payload(container.archive.finalize(session_id_of(event)))


def correlation_id(event: dict[str, Any]) -> str:
    if event.get("step") == "auto-archive":
        return "auto-archive"
    return str(event.get("id") or session_id_of(event))


ENTRY = task("openagents-archiver", run, correlation_id=correlation_id)
lambda_handler = ENTRY.handler
runtime = ENTRY.runtime

gc.freeze()
gc.enable()
