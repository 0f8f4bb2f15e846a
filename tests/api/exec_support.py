"""A local server whose sandboxes are fakes: ``exec`` of ``block`` waits until released, so
tests hold commands "running" for as long as they like without a real sandbox."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState
from openagents.local.dynamodb import free_port
from openagents.sandbox.port import ExecResult, SandboxError, SandboxHandle
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from functions.api.app import create_app
from tests.sandboxd_fake import SandboxdFake
from tests.support import USER_AGENT, NoMetrics

BLOCK = "block"  # the command that waits for FakeSandbox.release
FAIL = "fail"  # the command sandboxd refuses (400)


class FakeSandbox(SandboxdFake):
    """Every session's sandbox: counts the commands inside, holds ``block`` ones."""

    def __init__(self) -> None:
        self._released = threading.Event()
        self._changed = threading.Condition()
        self.inside = 0

    def exec(self, command: str | None = None, **_: Any) -> ExecResult:
        if command == FAIL:
            raise SandboxError("refused", status=400, code="bad_request")
        with self._changed:
            self.inside += 1
            self._changed.notify_all()
        try:
            if command == BLOCK and not self._released.wait(timeout=60):
                raise AssertionError("never released")
            return ExecResult(0, f"{command}\n", "", duration_ms=1)
        finally:
            with self._changed:
                self.inside -= 1
                self._changed.notify_all()

    def wait_inside(self, count: int, timeout: float = 20) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.inside == count, timeout=timeout):
                raise AssertionError(f"{self.inside} commands inside, expected {count}")

    def release(self) -> None:
        self._released.set()


@dataclass
class ExecServer:
    container: Container
    sandbox: FakeSandbox
    client: httpx.Client
    tokens: dict[str, str]

    def active_session(self, user: str) -> str:
        """A session of ``user`` whose (fake) sandbox is running."""
        session, _ = self.container.sessions.create(Identity(user, user), NewSession(title=None))
        handle = SandboxHandle(
            driver="local",
            session_id=session.id,
            generation=1,
            ref="fake",
            endpoint="http://fake.invalid",
        )
        self.container.lifecycle._store.transition(
            session.id,
            expect=frozenset(LifecycleState),
            changes={"lifecycle_state": LifecycleState.ACTIVE, "sandbox": handle},
            entry=None,
        )
        return session.id

    def exec(self, user: str, session_id: str, command: str) -> httpx.Response:
        return self.client.post(
            f"/api/sessions/{session_id}/sandbox/exec",
            json={"command": command},
            headers={"authorization": f"Bearer {self.token(user)}"},
        )

    def token(self, user: str) -> str:
        if user not in self.tokens:
            assert self.container.local_tokens is not None
            self.tokens[user] = self.container.local_tokens.mint(user, ttl_seconds=600)
        return self.tokens[user]


@contextmanager
def exec_server(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[ExecServer]:
    """A real uvicorn server (as ``openagents dev`` runs it) over a container whose sandbox
    clients are one FakeSandbox."""
    container = build(settings, NoMetrics())
    sandbox = FakeSandbox()
    monkeypatch.setattr(container.sandbox_tools, "_clients", lambda handle: sandbox)
    app = create_app(lambda: settings)
    app.state.container = lambda: container
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", limit_concurrency=None
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "local server did not start"
        time.sleep(0.01)
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        timeout=60,
        headers={"user-agent": USER_AGENT},
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
    )
    try:
        yield ExecServer(container, sandbox, client, {})
    finally:
        sandbox.release()
        client.close()
        server.should_exit = True
        thread.join(timeout=10)
        container.sandbox_tools._exec_pool.shutdown()
