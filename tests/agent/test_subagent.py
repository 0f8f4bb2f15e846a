"""The subagent loop on its own: its budget, its stop, its model's failures (no sandbox: the
calls here never reach a tool)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.models.scripted import ScriptedModel
from openagents.agent.subagent import Subagent, SubagentProgress
from openagents.agent.tools import TOOLS, Cancelled, ToolContext, ToolFailure


def scripted(tmp_path: Path, responses: list[dict[str, Any]]) -> ScriptedModel:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": responses}))
    return ScriptedModel(path)


def subagent(model: ScriptedModel, **kw: Any) -> Subagent:
    return Subagent(model, TOOLS, workspace=None, **kw)  # type: ignore[arg-type]


def test_the_step_budget_ends_the_subagent_with_its_last_words(tmp_path: Path) -> None:
    call = {"name": "todo_write", "input": {"todos": []}}  # not a subagent tool
    model = scripted(tmp_path, [{"text": f"try {i}", "toolCalls": [call]} for i in range(5)])
    seen: list[SubagentProgress] = []
    agent = subagent(model, max_steps=3)
    result = agent.run("explorer", "t", "i", first_step=1, progress=seen.append)
    assert result.stopped_at_limit
    assert result.model_calls == 3
    assert result.summary.endswith("try 3")  # responses 1..3: the run's model calls 1..3
    assert [p.steps for p in seen] == [1, 2, 3]
    assert result.tool_calls == ["todo_write"] * 3
    assert agent.result is result


def test_a_stop_request_stops_it_before_the_next_model_call(tmp_path: Path) -> None:
    model = scripted(tmp_path, [{"text": "never"}])
    with pytest.raises(Cancelled):
        subagent(model, cancelled=lambda: True).run("executor", "t", "i", first_step=0)


def test_its_model_failing_is_the_task_tools_failure(tmp_path: Path) -> None:
    model = scripted(tmp_path, [])  # no response for step 0
    with pytest.raises(ToolFailure) as caught:
        subagent(model).run("executor", "t", "i", first_step=0)
    assert "no response for step 0" in caught.value.message


def test_a_subagent_cannot_start_another(tmp_path: Path) -> None:
    task = TOOLS["task"]
    with pytest.raises(ToolFailure) as caught:
        task.run(
            {"subagentType": "explorer", "task": "t", "instructions": "i"},
            ToolContext(workspace=None),  # type: ignore[arg-type]
        )
    assert "cannot start another subagent" in caught.value.message
    with pytest.raises(ToolFailure):
        task.run(
            {"subagentType": "boss", "task": "t", "instructions": "i"},
            ToolContext(workspace=None),  # type: ignore[arg-type]
        )
