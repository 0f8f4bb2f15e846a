"""The whole agent loop on the one-machine runtime: the API over HTTP, real provisioning and
local sandboxes, the durable handler on the SDK's local runtime, and the scripted model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from openagents.composition import Container
from openagents.settings import Settings

from tests.support import (
    HttpApi,
    export_settings,
    make_origin,
    provisioning_runtime,
    serve_app,
)


class Script:
    """The scripted model's file: ``set(responses)`` rewrites it (read at every model call)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set([{"text": "Hello."}])

    def set(self, responses: list[dict[str, Any]], title: str | None = None) -> None:
        """The turn's responses, and the answer to the call that names a new chat (without
        one, that call fails and the automatic titles stay)."""
        script: dict[str, Any] = {"responses": responses}
        if title is not None:
            script["title"] = title
        self.path.write_text(json.dumps(script))


class AgentApi(HttpApi):
    def __init__(self, settings: Settings, base_url: str, app: FastAPI, script: Script) -> None:
        super().__init__(settings, base_url)
        self.app = app
        self.script = script

    @property
    def container(self) -> Container:
        built: Container = self.app.state.container()
        return built

    def turn(
        self, session_id: str, chat_id: str, text: str, message_id: str | None = None, **kw: Any
    ) -> Any:
        message = {
            "id": message_id or f"m-{time.monotonic_ns()}",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
        }
        return self.post(
            "/api/chat", {"sessionId": session_id, "chatId": chat_id, "message": message}, **kw
        )

    def events(self, chat_id: str, after: int = 0, timeout: float = 60) -> list[dict[str, Any]]:
        """Every event from ``after`` until the run ends (following ``next``)."""
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            page = self.get(f"/api/chat/{chat_id}/stream", query={"after": str(after), "wait": "5"})
            if page.status == 204:
                return found
            assert page.status == 200, page.body
            found += page.body["events"]
            after = page.body["next"]
        raise AssertionError("the run did not end")


@pytest.fixture
def agent_api(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[AgentApi]:
    script = Script(tmp_path / "script.json")
    scripted = settings.model_copy(update={"scripted_model_file": script.path})
    with provisioning_runtime(scripted, moto_endpoint, monkeypatch) as live:
        export_settings(live, monkeypatch)
        with serve_app(live) as (base_url, app):
            client = AgentApi(live, base_url, app, script)
            try:
                yield client
            finally:
                client.client.close()
                engine = client.container.agent.engine
                close = getattr(engine, "close", None)
                if close is not None:
                    close()


def wait_state(api: HttpApi, session_id: str, *states: str, user: str = "alice") -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        reply = api.get(f"/api/sessions/{session_id}", user=user)
        session: dict[str, Any] = reply.body["session"]
        if session["lifecycleState"] in states:
            return session
        time.sleep(0.2)
    raise AssertionError(f"session stayed {session['lifecycleState']}")


@pytest.fixture
def live_session(agent_api: AgentApi, tmp_path: Path) -> tuple[str, str]:
    """An active session on a local repository: (session id, its first chat id)."""
    origin = make_origin(tmp_path)
    created = agent_api.post("/api/sessions", {"repoUrl": f"file://{origin}", "branch": "feature"})
    assert created.status == 201, created.body
    session = wait_state(agent_api, created.body["session"]["id"], "active", "failed")
    assert session["lifecycleState"] == "active", session["lifecycleError"]
    return str(session["id"]), str(created.body["chat"]["id"])


@pytest.fixture(scope="session", autouse=True)
def _killed_runtimes_unwind_at_the_end() -> Iterator[None]:
    """A killed runtime's threads (tests/agent/restarts.py) block until the session ends, then
    unwind: left blocked, they kept pytest from exiting after its summary."""
    yield
    from tests.agent.restarts import TESTS_OVER

    TESTS_OVER.set()
