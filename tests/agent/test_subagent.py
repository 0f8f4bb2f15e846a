"""The subagent loop on its own: its budget, its stop, its model's failures (no sandbox: the
calls here never reach a tool)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.models.scripted import ScriptedModel
from openagents.agent.sandbox import ExecResult
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


class KeyedWorkspace:
    """A workspace that records each exec's idempotency key and answers it."""

    def __init__(self) -> None:
        self.keys: list[str | None] = []

    def exec(self, *, key: str | None = None, **kw: Any) -> ExecResult:
        self.keys.append(key)
        return ExecResult(exit_code=0, stdout="ok\n", stderr="")


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": command}}


def _keys(tmp_path: Path, parent: str, commands: list[str]) -> list[str | None]:
    model = scripted(tmp_path, [{"toolCalls": [_bash(c) for c in commands]}, {"text": "Done."}])
    workspace = KeyedWorkspace()
    agent = Subagent(model, TOOLS, workspace, parent_call_id=parent)  # type: ignore[arg-type]
    result = agent.run("executor", "t", "i", first_step=0)
    assert result.summary == "Done."
    return workspace.keys


def test_a_subagents_commands_are_keyed_by_the_task_call_and_their_place(
    tmp_path: Path,
) -> None:
    first = _keys(tmp_path, "task-call-1", ["git commit -m a", "make test"])
    assert all(k is not None and k.startswith("bash:task-call-1/1.") for k in first)
    assert first[0] != first[1]  # two calls of one step: two keys
    # the task step run again after a restart: the same commands, under the same keys (so
    # sandboxd answers what the first attempt ran instead of running it again)
    assert _keys(tmp_path, "task-call-1", ["git commit -m a", "make test"]) == first
    # another task call's subagent: its own keys, though its model numbers calls the same
    assert set(_keys(tmp_path, "task-call-2", ["git commit -m a", "make test"])).isdisjoint(first)
    # asked something else at the same place: another command, another key
    other = _keys(tmp_path, "task-call-1", ["git commit -m b", "make test"])
    assert other[0] != first[0]
    assert other[1] == first[1]
