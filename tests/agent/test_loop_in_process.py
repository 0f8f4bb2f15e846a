"""The turn's loop driven in process: ``durable.run_turn`` over the real steps (``AgentLoop``)
on a SQLite store, the scripted model, a fake workspace and a host of the test's own; the
engine is a journal of step results, as the durable SDK keeps them, so a step in flight when
its process died runs again in the next one while the recorded steps return their results.
No HTTP, no sandbox, no timer: each test runs in milliseconds."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.durable import run_turn
from openagents.agent.loop import AgentLoop, LoopConfig
from openagents.agent.models.port import ModelEvent, ModelRequest
from openagents.agent.models.registry import ModelInfo, ModelRegistry
from openagents.agent.models.scripted import ScriptedModel
from openagents.agent.prompt import Project
from openagents.agent.replay import merged
from openagents.agent.sandbox import ExecResult, FileText, SandboxError, Workspace
from openagents.agent.stream import EventWriter
from openagents.agent.tool_runner import STOPPED
from openagents.agent.ui import AssistantMessage, UIMessageJson
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.attachments import AttachmentFile
from openagents.domain.checkpoints import Checkpoint
from openagents.domain.errors import InvalidInput
from openagents.domain.models import Chat, Message, Role, Session
from openagents.store.runs import Run, RunStatus, TurnMessage
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore

from tests.contract.helpers import create

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MODEL = "scripted/default"
LOOK: list[dict[str, Any]] = [
    {
        "reasoning": "First look at the files.",
        "text": "Let me look at the workspace.",
        "toolCalls": [{"name": "bash", "input": {"command": "ls"}}],
    },
    {"text": "The workspace holds a readme; nothing else to do."},
]


class Killed(Exception):
    """The process died here: the engine's own failure, never the turn's."""


class FakeWorkspace:
    def __init__(self) -> None:
        self.files = {"README.md": "hello"}
        self.commands: list[str] = []
        self.checkpoints: list[str] = []
        self.broken = False

    def exec(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> ExecResult:
        if self.broken:
            raise SandboxError("the sandbox is gone")
        self.commands.append((env or {}).get("OPENAGENTS_COMMAND", str(command)))
        return ExecResult(0, "\n".join(sorted(self.files)) + "\n", "")

    def read_text(self, path: str, max_bytes: int = 10 << 20) -> FileText:
        if path not in self.files:
            raise SandboxError(f"no such file: {path}")
        content = self.files[path]
        return FileText(content, len(content), False)

    def write_text(self, path: str, content: str) -> None:
        self.files[path] = content

    def checkpoint(self, ref: str) -> Checkpoint:
        self.checkpoints.append(ref)
        return Checkpoint(ref, "c0ffee", len(self.files))


@dataclass
class Host:
    """The turn's host on the store: the chat's messages, the fake workspace, the session's
    "ask before running" tools."""

    store: SqliteStore
    session: Session
    chat: Chat
    workspace_: Workspace
    ask: dict[str, str] = field(default_factory=dict)
    beats: int = 0
    ended_runs: list[str] = field(default_factory=list)

    def messages(self, run: Run) -> list[UIMessageJson]:
        page = self.store.list_messages(run.session_id, run.chat_id, 500, None)
        return [message.parts for message in page.items]

    def save(self, run: Run, message: AssistantMessage) -> None:
        stored = self.stored(run, message)
        self.store.put_message(stored.session, stored.chat, stored.message, activity=None)

    def stored(self, run: Run, message: AssistantMessage) -> TurnMessage:
        body = Message(
            id=message.id,
            chat_id=self.chat.id,
            role=Role.ASSISTANT,
            parts=message.to_json(),
            created_at=AT,
        )
        return TurnMessage(self.session, self.chat, body, activity=None)

    def attachment(self, run: Run, url: str) -> AttachmentFile | None:
        return None  # these turns send no files

    def workspace(self, run: Run) -> Workspace:
        return self.workspace_

    def project(self, run: Run) -> Project:
        return Project("example/repo", "main")

    def heartbeat(self, run: Run) -> None:
        self.beats += 1

    def approval(self, run: Run, tool: str) -> str | None:
        return self.ask.get(tool)

    def ended(self, run: Run) -> None:
        self.ended_runs.append(run.id)

    def untitled(self, run: Run) -> str | None:
        return None

    def retitle(self, run: Run, title: str) -> None:
        raise AssertionError("no title is generated here")


class Journal:
    """The engine: each named step's result recorded once it returned; a step recorded
    returns its result again, as a durable execution's replay does."""

    def __init__(self) -> None:
        self.done: dict[str, Any] = {}
        self.ran: list[str] = []

    def step(self, func: Callable[[Any], Any], name: str | None = None) -> Any:
        key = str(name)
        if key not in self.done:
            self.ran.append(key)
            self.done[key] = func(None)
        return self.done[key]


class Dying:
    """The scripted model, dying after ``after`` events of model call ``step``."""

    def __init__(self, inner: ScriptedModel, step: int, after: int) -> None:
        self._inner, self._step, self._after = inner, step, after

    def stream(self, request: ModelRequest, **kw: Any) -> Iterator[ModelEvent]:
        for i, event in enumerate(self._inner.stream(request, **kw)):
            if request.step == self._step and i == self._after:
                raise Killed
            yield event


@dataclass
class World:
    tmp: Path
    store: SqliteStore
    runs: SqliteRunStore
    host: Host
    workspace: FakeWorkspace
    script: Path
    turns: int = 0

    def registry(self, wrap: Callable[[ScriptedModel], Any] = lambda model: model) -> ModelRegistry:
        info = ModelInfo(MODEL, "scripted", "default", context_window=200_000)
        model = wrap(ScriptedModel(self.script))
        return ModelRegistry({MODEL: (info, lambda _id: model)})

    def loop(self, wrap: Callable[[ScriptedModel], Any] = lambda model: model) -> AgentLoop:
        """A loop of a fresh process: nothing kept from another."""
        return AgentLoop(self.runs, self.host, self.registry(wrap), lambda: AT, LoopConfig())

    def set(self, responses: list[dict[str, Any]]) -> None:
        self.script.write_text(json.dumps({"responses": responses}))

    def start(self, text: str = "Look around") -> Run:
        """A turn in the chat: the user message and the run in one write."""
        self.turns += 1
        n = self.turns
        user = Message(
            id=f"u-{n}",
            chat_id=self.host.chat.id,
            role=Role.USER,
            parts={"id": f"u-{n}", "role": "user", "parts": [{"type": "text", "text": text}]},
            created_at=AT,
        )
        run = Run(
            id=f"run-{n}",
            session_id=self.host.session.id,
            chat_id=self.host.chat.id,
            user_id=self.host.session.user_id,
            message_id=user.id,
            assistant_message_id=f"a-{n}",
            model_id=MODEL,
            started_at=AT,
        )
        self.runs.start(run, TurnMessage(self.host.session, self.host.chat, user, None))
        return run

    def chunks(self, run_id: str) -> list[dict[str, Any]]:
        events = self.runs.events(run_id, 0)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        return merged([e.chunk for e in events])

    def assistant(self, message_id: str) -> dict[str, Any]:
        page = self.store.list_messages(self.host.session.id, self.host.chat.id, 500, None)
        (found,) = [m.parts for m in page.items if m.id == message_id]
        return dict(found)


@pytest.fixture(autouse=True)
def every_chunk_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk written at once (no 200 ms timer): what a dying step leaves is exact."""
    defaults = dict(EventWriter.__init__.__kwdefaults__ or {})
    monkeypatch.setattr(EventWriter.__init__, "__kwdefaults__", {**defaults, "flush_seconds": 0})


@pytest.fixture
def world(tmp_path: Path) -> World:
    store = SqliteStore(tmp_path / "db", FolderArtifactStore(tmp_path / "artifacts"), 4096)
    session = create(store)
    chat = store.get_chat(session.id, next(iter(session.chats)))
    assert chat is not None
    workspace = FakeWorkspace()
    host = Host(store, session, chat, workspace)
    made = World(tmp_path, store, SqliteRunStore(store), host, workspace, tmp_path / "s.json")
    made.set(LOOK)
    return made


def turn(world: World, run: Run, loop: AgentLoop | None = None) -> dict[str, Any]:
    return run_turn({"runId": run.id}, Journal(), loop or world.loop())


def test_a_turn_streams_calls_a_tool_and_ends_with_text(world: World) -> None:
    run = world.start()
    assert turn(world, run) == {"runId": run.id, "status": "completed"}
    assert world.workspace.commands == ["ls"]
    assert world.workspace.checkpoints == [f"refs/openagents/checkpoints/{run.id}"]
    types = [c["type"] for c in world.chunks(run.id)]
    assert types == [
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    message = world.assistant(run.assistant_message_id)
    parts = message["parts"]
    assert [p["type"] for p in parts] == [
        "step-start",
        "reasoning",
        "text",
        "tool-bash",
        "step-start",
        "text",
    ]
    assert {p.get("state") for p in parts if p["type"] in ("text", "reasoning")} == {"done"}
    assert parts[3]["state"] == "output-available"
    assert parts[3]["input"] == {"command": "ls"}
    assert parts[2]["text"] == "Let me look at the workspace."
    assert message["metadata"]["stepFinishReasons"] == ["tool_use", "end_turn"]
    assert message["metadata"]["modelId"] == MODEL
    ended = world.runs.get(run.id)
    assert ended is not None
    assert (ended.status, ended.model_calls, ended.steps) == (RunStatus.COMPLETED, 2, 3)
    assert world.host.ended_runs == [run.id]


@pytest.mark.parametrize(("step", "after"), [(0, 3), (0, 9), (1, 2)])
def test_a_model_step_killed_mid_stream_runs_again_and_logs_nothing_twice(
    world: World, step: int, after: int
) -> None:
    clean = world.start()
    turn(world, clean)
    expected_chunks = _anonymous(world.chunks(clean.id))
    expected_parts = world.assistant(clean.assistant_message_id)["parts"]

    run = world.start()
    journal = Journal()
    dying = world.loop(lambda model: Dying(model, step, after))
    with pytest.raises(Killed):
        run_turn({"runId": run.id}, journal, dying, engine_error=lambda e: isinstance(e, Killed))
    logged = world.runs.events(run.id, 0)
    assert logged  # clients have read the attempt's first chunks
    in_flight = f"model-{step}"
    assert in_flight not in journal.done

    result = run_turn({"runId": run.id}, journal, world.loop())  # the next process
    assert result == {"runId": run.id, "status": "completed"}
    assert journal.ran.count(in_flight) == 2  # the step in flight ran again; the others once
    assert len(journal.ran) == len(set(journal.ran)) + 1
    assert world.runs.events(run.id, 0)[: len(logged)] == logged
    assert _anonymous(world.chunks(run.id)) == expected_chunks
    assert world.assistant(run.assistant_message_id)["parts"] == expected_parts
    assert world.workspace.commands == ["ls", "ls"]  # one per turn: the bash step ran once


def test_a_call_the_session_asks_about_waits_then_runs_once_approved(world: World) -> None:
    world.host.ask["bash"] = "The session asks before bash."
    run = world.start()
    assert turn(world, run)["status"] == "waiting"
    assert world.workspace.commands == []
    (request,) = [c for c in world.chunks(run.id) if c["type"] == "tool-approval-request"]
    assert request["reason"] == "The session asks before bash."
    part = world.assistant(run.assistant_message_id)["parts"][3]
    assert part["state"] == "approval-requested"
    assert part["approval"] == {"id": request["approvalId"], "reason": request["reason"]}

    waiting = world.runs.get(run.id)
    assert waiting is not None
    answered = world.loop().answer(
        waiting, request["toolCallId"], approved=True, reason=None, answers=None
    )
    assert answered.pending == 0
    part = world.assistant(run.assistant_message_id)["parts"][3]
    assert part["state"] == "approval-responded"
    assert part["approval"]["approved"] is True

    world.set([{"text": "Ran it."}])  # the continuing run's first model call (step 0)
    again = _continuing(world, waiting, request["toolCallId"], answered.parts)
    assert turn(world, again)["status"] == "completed"
    assert world.workspace.commands == ["ls"]
    parts = world.assistant(run.assistant_message_id)["parts"]
    assert parts[3]["state"] == "output-available"
    assert parts[3]["approval"]["approved"] is True
    assert [p["type"] for p in parts][-2:] == ["step-start", "text"]


def test_a_denied_call_is_the_model_s_error_and_never_runs(world: World) -> None:
    world.host.ask["bash"] = "Ask first."
    run = world.start()
    turn(world, run)
    waiting = world.runs.get(run.id)
    assert waiting is not None
    call_id = world.assistant(run.assistant_message_id)["parts"][3]["toolCallId"]
    loop = world.loop()
    answered = loop.answer(waiting, call_id, approved=False, reason="not now", answers=None)
    assert answered.pending == 0
    part = world.assistant(run.assistant_message_id)["parts"][3]
    assert part["state"] == "output-denied"
    assert part["approval"]["reason"] == "not now"
    assert loop.begin(run.id).calls == ()  # nothing approved to run
    assert world.workspace.commands == []


def test_answers_that_do_not_fit_name_the_field_and_change_nothing(world: World) -> None:
    world.host.ask["bash"] = "Ask first."
    run = world.start()
    turn(world, run)
    waiting = world.runs.get(run.id)
    assert waiting is not None
    before = world.assistant(run.assistant_message_id)
    call_id = before["parts"][3]["toolCallId"]
    loop = world.loop()
    with pytest.raises(InvalidInput) as unknown:
        loop.answer(waiting, "no-such-call", approved=True, reason=None, answers=None)
    with pytest.raises(InvalidInput) as missing:
        loop.answer(waiting, call_id, approved=None, reason=None, answers=["yes"])
    assert (unknown.value.field, missing.value.field) == ("toolCallId", "approved")
    loop.answer(waiting, call_id, approved=True, reason=None, answers=None)
    with pytest.raises(InvalidInput) as twice:
        loop.answer(waiting, call_id, approved=True, reason=None, answers=None)
    assert twice.value.field == "toolCallId"
    after = world.assistant(run.assistant_message_id)
    assert [p["type"] for p in after["parts"]] == [p["type"] for p in before["parts"]]


def test_a_sandbox_that_fails_a_call_is_the_model_s_error_and_the_turn_goes_on(
    world: World,
) -> None:
    world.workspace.broken = True
    run = world.start()
    assert turn(world, run)["status"] == "completed"
    part = world.assistant(run.assistant_message_id)["parts"][3]
    assert (part["state"], part["errorText"]) == ("output-error", "the sandbox is gone")
    (error,) = [c for c in world.chunks(run.id) if c["type"] == "tool-output-error"]
    assert error["errorText"] == "the sandbox is gone"


def test_a_stop_before_the_tool_step_ends_the_run_aborted_with_the_call_stopped(
    world: World,
) -> None:
    run = world.start()
    loop = world.loop()
    journal = Journal()
    journal.step(lambda _: loop.begin(run.id).to_json(), name="begin")
    journal.step(lambda _: loop.model_step(run.id, 0).to_json(), name="model-0")
    assert world.runs.request_cancel(run.id)
    assert run_turn({"runId": run.id}, journal, loop)["status"] == "aborted"
    assert world.workspace.commands == []
    part = world.assistant(run.assistant_message_id)["parts"][3]
    assert (part["state"], part["errorText"]) == ("output-error", STOPPED)
    assert [c["type"] for c in world.chunks(run.id)][-2:] == ["abort", "finish"]


def _continuing(world: World, waiting: Run, call_id: str, parts: int) -> Run:
    """The run ``respond`` starts once nothing waits: the same assistant message, continued."""
    run = Run(
        id=f"{waiting.id}-more",
        session_id=waiting.session_id,
        chat_id=waiting.chat_id,
        user_id=waiting.user_id,
        message_id=f"{waiting.id}:{call_id}",
        assistant_message_id=waiting.assistant_message_id,
        model_id=MODEL,
        started_at=AT,
        continued_parts=parts,
    )
    assert world.runs.start(run).created
    return run


def _anonymous(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chunks without their message, block and call ids (they name the run's own)."""
    return [
        {k: v for k, v in chunk.items() if k not in ("messageId", "toolCallId", "approvalId")}
        for chunk in chunks
    ]


TODO = {"todos": [{"id": "1", "content": "look", "status": "pending"}]}
TODOS_THEN_BASH: list[dict[str, Any]] = [
    {"text": "Plan first.", "toolCalls": [{"name": "todo_write", "input": TODO}]},
    {"toolCalls": [{"name": "todo_write", "input": TODO}, {"name": "todo_write", "input": TODO}]},
    {
        "toolCalls": [
            {"name": "todo_write", "input": TODO},
            {"name": "bash", "input": {"command": "ls"}},
        ]
    },
    {"text": "Done."},
]


def test_calls_that_run_in_the_model_step_stream_and_store_as_tool_steps_would(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the run's second model step on, a step whose calls are all todo_write runs them
    itself (one durable step, one write); the first model step's calls, and a step with a call
    that is not one of them, keep their tool steps. The stream and the message are what tool
    steps give."""
    world.set(TODOS_THEN_BASH)
    journal = Journal()
    run = world.start()
    assert run_turn({"runId": run.id}, journal, world.loop())["status"] == "completed"
    assert journal.ran == [
        "begin",
        "model-0",
        "title",  # the chat's first turn
        "checkpoint",
        "tool-0-0",
        "model-1",  # its two todo_write calls in it
        "model-2",
        "tool-2-0",
        "tool-2-1",
        "model-3",
        "finalize",
        "follow-ups",
    ]
    from openagents.agent.tools.misc import TodoWriteTool

    monkeypatch.setattr(TodoWriteTool, "in_model_step", False)
    apart, baseline = Journal(), world.start()
    assert run_turn({"runId": baseline.id}, apart, world.loop())["status"] == "completed"
    assert "tool-1-1" in apart.ran
    assert _anonymous(world.chunks(run.id)) == _anonymous(world.chunks(baseline.id))
    parts = world.assistant(run.assistant_message_id)["parts"]
    assert parts == world.assistant(baseline.assistant_message_id)["parts"]
    todos = [p for p in parts if p["type"] == "tool-todo_write"]
    assert [p["state"] for p in todos] == ["output-available"] * 4
    ended, plain = world.runs.get(run.id), world.runs.get(baseline.id)
    assert ended is not None
    assert plain is not None
    assert ended.model_calls == plain.model_calls == 4
    assert ended.steps == plain.steps  # each call counted as a step, as its tool step was


def test_a_model_step_killed_after_its_calls_ran_in_it_runs_again_whole(world: World) -> None:
    world.set(TODOS_THEN_BASH)
    clean = world.start()
    turn(world, clean)
    expected = _anonymous(world.chunks(clean.id))

    run = world.start()
    journal = Journal()
    dying = world.loop(lambda model: Dying(model, 1, 1))
    with pytest.raises(Killed):
        run_turn({"runId": run.id}, journal, dying, engine_error=lambda e: isinstance(e, Killed))
    assert "model-1" not in journal.done
    result = run_turn({"runId": run.id}, journal, world.loop())
    assert result == {"runId": run.id, "status": "completed"}
    assert journal.ran.count("model-1") == 2
    assert _anonymous(world.chunks(run.id)) == expected
