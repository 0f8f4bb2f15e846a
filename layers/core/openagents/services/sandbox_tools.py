"""Sandbox tools on the API: exec, files, git status, diff (cached on the session)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from openagents.artifacts import ArtifactStore
from openagents.domain.checkpoints import NoCheckpoint
from openagents.domain.errors import InvalidInput, NotFound, RateLimited, SandboxNotRunning
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.sandbox.port import (
    ExecResult,
    FileContent,
    FileList,
    GitDiff,
    GitStatus,
    Reverted,
    Sandboxd,
    SandboxdClients,
    SandboxError,
)
from openagents.services import Clock
from openagents.services.caps import Caps, Counted, Slot, Wording
from openagents.services.sessions import owned
from openagents.services.transitions import Change, Transitions
from openagents.store.port import StaleState, Store

log = logging.getLogger(__name__)

ACTIVE = frozenset({LifecycleState.ACTIVE})
NOT_RUNNING = "Sandbox is not running. Resume it first."
CHECKPOINT_GONE = frozenset({"checkpoint_not_found", "not_a_checkpoint", "not_a_repository"})


def running_sandbox(
    store: Store, clients: SandboxdClients, identity: Identity, session_id: str
) -> tuple[Session, Sandboxd]:
    """The caller's session and its running sandbox's client (404 for another user's, 409
    ``sandbox_not_running`` unless it is active with an endpoint)."""
    return sandbox_of(owned(store.get_session(session_id), identity), clients)


def sandbox_of(session: Session, clients: SandboxdClients) -> tuple[Session, Sandboxd]:
    """``running_sandbox`` of a session already read and owned."""
    handle = session.sandbox
    if session.lifecycle_state is not LifecycleState.ACTIVE or not handle or not handle.endpoint:
        raise SandboxNotRunning(NOT_RUNNING)
    return session, clients(handle)


def diff_key(session_id: str) -> str:
    return f"diffs/{session_id}.json"


class TooManyCommands(RateLimited):
    """Over a concurrent-command cap (429 with ``Retry-After``)."""

    code = "too_many_commands"


T = TypeVar("T")
EXEC_RETRY_AFTER_SECONDS = 2
COMMANDS = Wording(
    "commands run", "in a session", "The server runs as many commands as it can; retry shortly"
)


class ExecPool:
    """Sandbox commands run on this pool's own threads, never the API's request threads, at
    most ``per_session`` at once per session, ``per_user`` per user and ``total`` in all (the
    pool's size, so an admitted command never queues)."""

    def __init__(self, per_session: int, per_user: int, total: int) -> None:
        caps = Caps(per_session, per_user, total)
        self._slots = Counted(lambda: caps, COMMANDS, TooManyCommands, EXEC_RETRY_AFTER_SECONDS)
        self._executor = ThreadPoolExecutor(max_workers=total, thread_name_prefix="sandbox-exec")

    def admit(self, user_id: str, session_id: str) -> Slot:
        """A slot, or TooManyCommands when a cap is reached (nothing is counted then)."""
        return self._slots.admit(user_id, session_id)

    def submit(self, slot: Slot, call: Callable[[], T]) -> Future[T]:
        """Run ``call`` on a pool thread, holding ``slot`` until it ends (or is cancelled)."""

        def held() -> T:
            with slot:
                return call()

        try:
            # the request's context (correlation ids, the tracer's segment) goes with it
            future = self._executor.submit(contextvars.copy_context().run, held)
        except BaseException:
            slot.release()
            raise
        future.add_done_callback(lambda done: slot.release() if done.cancelled() else None)
        return future

    def running(self) -> int:
        return self._slots.held

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class SandboxTools:
    def __init__(
        self,
        store: Store,
        clients: SandboxdClients,
        clock: Clock,
        artifacts: ArtifactStore,
        exec_pool: ExecPool,
        transitions: Transitions,
        on_unreachable: Callable[[Session], object] | None = None,
    ) -> None:
        self._exec_pool = exec_pool
        self._transitions = transitions
        self._on_unreachable = on_unreachable
        self._store = store
        self._clients = clients
        self._clock = clock
        self._artifacts = artifacts

    def _running(self, identity: Identity, session_id: str) -> tuple[Session, Sandboxd]:
        return running_sandbox(self._store, self._clients, identity, session_id)

    def _call(self, identity: Identity, session_id: str, op: Callable[[Sandboxd], Any]) -> Any:
        session, client = self._running(identity, session_id)
        return self._sandbox_call(session, lambda: op(client))

    def _sandbox_call(self, session: Session, call: Callable[[], Any]) -> Any:
        """sandboxd's 4xx answers are the caller's input errors (a missing file: 404); an
        unreachable sandbox is checked (a dead one is recorded as lost) and answered with 409.
        No answer names a sandboxd route or a host path: those stay in the log."""
        try:
            return call()
        except SandboxError as exc:
            log.info("sandbox call for %s failed: %s", session.id, exc)
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 401:
                message = public_detail(exc.detail or "The sandbox refused the request")
                if exc.status == 404:
                    raise NotFound(message, field="path") from exc
                raise InvalidInput(message, field=_field(exc.code)) from exc
            if exc.status is None and self._on_unreachable is not None:
                self._on_unreachable(session)
            raise SandboxNotRunning("The sandbox is unavailable. Please resume it.") from exc

    def submit_exec(
        self, identity: Identity, session_id: str, **request: Any
    ) -> Future[ExecResult]:
        """Check the session (404, 409) and the caps (429) now, in the caller's thread; the
        command then runs on the exec pool: await the future (``asyncio.wrap_future``)."""
        session, client = self._running(identity, session_id)
        slot = self._exec_pool.admit(identity.user_id, session.id)

        def run() -> ExecResult:
            result: ExecResult = self._sandbox_call(session, lambda: client.exec(**request))
            return result

        return self._exec_pool.submit(slot, run)

    def exec(self, identity: Identity, session_id: str, **request: Any) -> ExecResult:
        """The same, waiting for the result (callers that may block their thread)."""
        return self.submit_exec(identity, session_id, **request).result()

    def files(self, identity: Identity, session_id: str, path: str, depth: int) -> FileList:
        result: FileList = self._call(
            identity, session_id, lambda c: c.list_files(path=path, depth=depth)
        )
        return result

    def file_content(
        self, identity: Identity, session_id: str, path: str, max_bytes: int
    ) -> FileContent:
        result: FileContent = self._call(
            identity, session_id, lambda c: c.read_file(path, max_bytes=max_bytes)
        )
        return result

    def git_status(self, identity: Identity, session_id: str) -> GitStatus:
        result: GitStatus = self._call(identity, session_id, lambda c: c.git_status())
        return result

    def revert(
        self, identity: Identity, session_id: str, ref: str, *, save_ref: str | None, dry_run: bool
    ) -> Reverted:
        """The workspace back to checkpoint ``ref`` (``services/checkpoints.py``)."""

        def call(client: Sandboxd) -> Reverted:
            try:
                return client.revert(ref, save_ref=save_ref, dry_run=dry_run)
            except SandboxError as exc:
                if exc.code in CHECKPOINT_GONE:
                    raise NoCheckpoint(
                        "The turn's checkpoint is no longer in the sandbox", field="runId"
                    ) from exc
                raise

        result: Reverted = self._call(identity, session_id, call)
        return result

    def diff(self, identity: Identity, session_id: str) -> GitDiff:
        """Compute the diff, then cache it (artifact store) with the line counts on the session."""
        session, client = self._running(identity, session_id)
        diff: GitDiff = self._sandbox_call(session, client.git_diff)
        now = self._clock()
        self._artifacts.put(diff_key(session.id), json.dumps(diff.to_json()).encode())
        # the session may have left `active` meanwhile; the next diff updates the counts
        with contextlib.suppress(StaleState):
            counts = Change(
                lines_added=diff.total_additions,
                lines_removed=diff.total_deletions,
                cached_diff_at=now,
            )
            self._transitions.move(session, ACTIVE, counts)
        return diff

    def cached_diff(self, identity: Identity, session_id: str) -> tuple[GitDiff, datetime]:
        session = owned(self._store.get_session(session_id), identity)
        if session.cached_diff_at is None:
            raise NotFound("No cached diff available")
        diff = GitDiff.from_answer(json.loads(self._artifacts.get(diff_key(session.id))))
        return diff, session.cached_diff_at


ABSOLUTE_PATH = re.compile(r"(?<![\w.~-])(?:/[^\s/'\"]+)+/?")


def public_detail(text: str) -> str:
    """sandboxd's message with every absolute path replaced (workspace paths are host paths
    on one machine); relative paths, the caller's own, stay."""
    return ABSOLUTE_PATH.sub("<path>", text)


def _field(code: str | None) -> str | None:
    return "path" if code and "path" in code else None
