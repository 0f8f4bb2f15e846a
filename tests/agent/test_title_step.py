"""``AgentLoop.title_step`` on its own: the title it applies goes through the sanitiser, and
nothing it meets — no model configured, a model error, a failing store — fails the turn."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from openagents.agent.loop import AgentLoop, LoopConfig
from openagents.agent.models.port import (
    Finish,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ModelUnavailable,
    StopReason,
    TextDelta,
    Usage,
)
from openagents.agent.titles import TITLE_PROMPT
from openagents.store.runs import Run

RUN = Run(
    id="r1", session_id="s1", chat_id="c1", user_id="alice", message_id="m1",
    assistant_message_id="a1", model_id="scripted/default", started_at=datetime.now(UTC),
)  # fmt: skip


class Runs:
    def get(self, run_id: str) -> Run | None:
        return RUN if run_id == RUN.id else None

    def cancel_requested(self, run_id: str) -> bool:
        return False


class Host:
    def __init__(self, text: str | None = "fix the login bug", fail: bool = False) -> None:
        self.text, self.fail = text, fail
        self.titles: list[str] = []

    def untitled(self, run: Run) -> str | None:
        return self.text

    def retitle(self, run: Run, title: str) -> None:
        if self.fail:
            raise RuntimeError("the store is down")
        self.titles.append(title)


class Model:
    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest, **_: Any) -> Iterator[ModelEvent]:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        yield TextDelta(self.answer)
        yield Finish(StopReason.END_TURN, Usage(), Message("assistant", ()))


class Models:
    def __init__(self, model: Model | None) -> None:
        self._model = model

    def model(self, model_id: str) -> Model:
        if self._model is None:
            raise ModelUnavailable("No models are configured")
        return self._model


def loop(host: Host, model: Model | None) -> AgentLoop:
    return AgentLoop(
        Runs(),  # type: ignore[arg-type]
        host,  # type: ignore[arg-type]
        Models(model),  # type: ignore[arg-type]
        lambda: datetime.now(UTC),
        LoopConfig(),
    )


def test_the_answer_is_sanitised_and_applied_through_a_title_request() -> None:
    host, model = Host(), Model('  "Fix the login bug for good now"\nbecause')
    assert loop(host, model).title_step("r1") == "Fix the login bug for"
    assert host.titles == ["Fix the login bug for"]
    (request,) = model.requests
    assert request.purpose == "title"
    assert request.tools == ()
    assert request.messages == (Message.user(TITLE_PROMPT + "fix the login bug"),)


def test_nothing_to_name_calls_no_model() -> None:
    model = Model("Unused")
    assert loop(Host(text=None), model).title_step("r1") is None
    assert loop(Host(), model).title_step("no-such-run") is None
    assert model.requests == []


def test_no_model_a_model_error_an_empty_answer_or_a_failing_store_keep_the_titles() -> None:
    for host, model in (
        (Host(), None),
        (Host(), Model(ModelError(ModelErrorKind.THROTTLED, "slow down"))),
        (Host(), Model(RuntimeError("boom"))),
        (Host(), Model(" \n ")),
        (Host(fail=True), Model("A title")),
    ):
        assert loop(host, model).title_step("r1") is None
        assert host.titles == []
