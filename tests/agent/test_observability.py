"""The agent entry point observed as every entry point is: JSON log lines with the run id as the
correlation id, and a business metric per turn (started, ended with its status, steps, tokens)
flushed as EMF."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from tests.agent.conftest import AgentApi

TOOL_THEN_TEXT: list[dict[str, Any]] = [
    {"toolCalls": [{"name": "todo_write", "input": {"todos": []}}]},
    {"text": "Done."},
]


def _lines(out: str) -> list[dict[str, Any]]:
    found = []
    for line in out.splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            found.append(parsed)
    return found


def _metric(lines: list[dict[str, Any]], name: str) -> list[float]:
    """Every value of ``name`` in the EMF lines."""
    values: list[float] = []
    for line in lines:
        if "_aws" in line and name in line:
            value = line[name]
            values += value if isinstance(value, list) else [value]
    return values


def _succeeded(records: list[logging.LogRecord], name: str) -> bool:
    return any(r.name == name and getattr(r, "durableStatus", None) == "SUCCEEDED" for r in records)


def test_a_turn_logs_its_run_id_and_counts_its_metrics(
    agent_api: AgentApi,
    live_session: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(TOOL_THEN_TEXT)
    capsys.readouterr()
    started = agent_api.turn(session_id, chat_id, "plan nothing")
    assert started.status == 202, started.body
    run_id = started.body["runId"]
    agent_api.events(chat_id)
    runs = agent_api.get(f"/api/sessions/{session_id}/runs").body["runs"]
    assert (runs[0]["runId"], runs[0]["status"]) == (run_id, "completed")
    # the last invocation logs (and flushes) as the handler returns, just after the run ended
    agent = logging.getLogger("openagents-agent")
    deadline = time.monotonic() + 30
    while not _succeeded(caplog.records, agent.name) and time.monotonic() < deadline:
        time.sleep(0.05)
    agent_api.get(f"/api/sessions/{session_id}")  # a request after the end flushes what is left
    lines = _lines(capsys.readouterr().out)

    # each record as the function's own JSON handler writes it
    (handler,) = agent.handlers
    assert handler.formatter is not None
    invocations = [
        json.loads(handler.formatter.format(record))
        for record in caplog.records
        if record.name == agent.name and record.getMessage() == "invocation"
    ]
    assert invocations, "the agent function logged no invocation line"
    assert {line["service"] for line in invocations} == {"openagents-agent"}
    assert {line.get("correlation_id") for line in invocations} == {run_id}
    assert invocations[-1]["durableStatus"] == "SUCCEEDED"

    assert sum(_metric(lines, "AgentTurnStarted")) == 1
    assert sum(_metric(lines, "AgentTurnCompleted")) == 1
    assert sum(_metric(lines, "AgentTurnFailed")) == 0
    assert sum(_metric(lines, "AgentTurnSteps")) == runs[0]["steps"] > 0
    assert sum(_metric(lines, "AgentInputTokens")) == runs[0]["usage"]["inputTokens"] > 0
    assert sum(_metric(lines, "AgentOutputTokens")) == runs[0]["usage"]["outputTokens"]
