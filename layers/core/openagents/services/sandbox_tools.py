"""Sandbox tools on the API: exec, files, git status, diff (cached on the session)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from openagents.artifacts import ArtifactStore
from openagents.domain.errors import InvalidInput, NotFound, SandboxNotRunning
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.sandbox.port import SandboxError, SandboxExec, SandboxHandle
from openagents.services import Clock
from openagents.services.sessions import owned
from openagents.store.port import StaleState, Store

ACTIVE = frozenset({LifecycleState.ACTIVE})
NOT_RUNNING = "Sandbox is not running. Resume it first."


class ToolsOps(SandboxExec, Protocol):
    def list_files(self, path: str = ".", depth: int = 1) -> dict[str, Any]: ...
    def read_file(self, path: str, max_bytes: int = 1_048_576) -> dict[str, Any]: ...
    def git_status(self) -> dict[str, Any]: ...
    def git_diff(self) -> dict[str, Any]: ...


def diff_key(session_id: str) -> str:
    return f"diffs/{session_id}.json"


class SandboxTools:
    def __init__(
        self,
        store: Store,
        clients: Callable[[SandboxHandle], ToolsOps],
        clock: Clock,
        artifacts: ArtifactStore,
        on_unreachable: Callable[[Session], object] | None = None,
    ) -> None:
        self._on_unreachable = on_unreachable
        self._store = store
        self._clients = clients
        self._clock = clock
        self._artifacts = artifacts

    def _running(self, identity: Identity, session_id: str) -> tuple[Session, ToolsOps]:
        session = owned(self._store.get_session(session_id), identity)
        handle = session.sandbox
        if session.lifecycle_state is not LifecycleState.ACTIVE or not handle:
            raise SandboxNotRunning(NOT_RUNNING)
        sandbox = SandboxHandle.from_dict(handle)
        if sandbox.endpoint is None:
            raise SandboxNotRunning(NOT_RUNNING)
        return session, self._clients(sandbox)

    def _call(self, identity: Identity, session_id: str, op: Callable[[ToolsOps], Any]) -> Any:
        session, client = self._running(identity, session_id)
        return self._sandbox_call(session, lambda: op(client))

    def _sandbox_call(self, session: Session, call: Callable[[], Any]) -> Any:
        """sandboxd's 4xx answers are the caller's input errors; an unreachable sandbox is
        checked (a dead one is recorded as lost) and answered with 409."""
        try:
            return call()
        except SandboxError as exc:
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 401:
                raise InvalidInput(str(exc), field=_field(exc.code)) from exc
            if exc.status is None and self._on_unreachable is not None:
                self._on_unreachable(session)
            raise SandboxNotRunning(f"Sandbox is unavailable ({exc}). Please resume it.") from exc

    def exec(self, identity: Identity, session_id: str, **request: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call(identity, session_id, lambda c: c.exec(**request))
        return result

    def files(self, identity: Identity, session_id: str, path: str, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            identity, session_id, lambda c: c.list_files(path=path, depth=depth)
        )
        return result

    def file_content(
        self, identity: Identity, session_id: str, path: str, max_bytes: int
    ) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            identity, session_id, lambda c: c.read_file(path, max_bytes=max_bytes)
        )
        return result

    def git_status(self, identity: Identity, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(identity, session_id, lambda c: c.git_status())
        return result

    def diff(self, identity: Identity, session_id: str) -> dict[str, Any]:
        """Compute the diff, then cache it (artifact store) with the line counts on the session."""
        session, client = self._running(identity, session_id)
        diff: dict[str, Any] = self._sandbox_call(session, client.git_diff)
        now = self._clock()
        self._artifacts.put(diff_key(session.id), json.dumps(diff).encode())
        # the session may have left `active` meanwhile; the next diff updates the counts
        with contextlib.suppress(StaleState):
            self._store.transition(
                session.id,
                expect=ACTIVE,
                changes={
                    "lines_added": int(diff.get("totalAdditions", 0)),
                    "lines_removed": int(diff.get("totalDeletions", 0)),
                    "cached_diff_at": now,
                },
                entry=None,
            )
        return diff

    def cached_diff(self, identity: Identity, session_id: str) -> tuple[dict[str, Any], datetime]:
        session = owned(self._store.get_session(session_id), identity)
        if session.cached_diff_at is None:
            raise NotFound("No cached diff available")
        diff: dict[str, Any] = json.loads(self._artifacts.get(diff_key(session.id)))
        return diff, session.cached_diff_at


def _field(code: str | None) -> str | None:
    return "path" if code and "path" in code else None
