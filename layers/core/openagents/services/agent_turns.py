"""Agent turns: the use cases behind ``/api/chat`` (post a message → a run, stream its events,
stop it, list runs, list models) and the host side of the loop (``AgentHost``: messages, the
sandbox, heartbeats, the turn-end follow-ups), and the turn's business metrics (``measure``:
``AgentTurnStarted`` when a turn starts, ``AgentTurn<Status>``, steps and tokens when it ends)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal, Protocol

from openagents.agent.loop import AgentLoop, TurnHost
from openagents.agent.models.port import JsonValue, ModelUnavailable
from openagents.agent.models.registry import ModelInfo, ModelRegistry
from openagents.agent.prompt import Project
from openagents.agent.sandbox import SandboxError, Workspace, WorkspaceClient
from openagents.agent.ui import AssistantMessage, UIMessageJson
from openagents.domain.attachments import AttachmentFile
from openagents.domain.errors import (
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    SessionArchived,
    StorageFull,
    TurnConflict,
    Unavailable,
)
from openagents.domain.identity import Identity
from openagents.domain.models import (
    AuditEntry,
    Chat,
    LifecycleState,
    Message,
    Page,
    Role,
    Session,
    SessionStatus,
    TitleSource,
)
from openagents.sandbox.port import SandboxdClients
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.attachments import AttachmentFiles, Attachments, file_parts
from openagents.services.chats import ChatService, message_error
from openagents.services.lifecycle import Activity
from openagents.services.sessions import owned
from openagents.store.port import BadCursor, Gone, MessageIdTaken, Store
from openagents.store.runs import (
    Run,
    RunStatus,
    RunStore,
    StreamEvent,
    TurnInProgress,
    TurnMessage,
)

log = logging.getLogger(__name__)
STREAM_DEFAULT_WAIT = 20.0
STREAM_MAX_WAIT = 25.0
STREAM_POLL_SECONDS = 0.15
STREAM_PAGE_BYTES = 1 << 20  # a page's chunks (as JSON) stop past 1 MiB; at least one each page
RUNS_PAGE = 50
MESSAGES_PAGE = 50  # looking for the message a run continues, newest first
SANDBOX_WAIT_SECONDS = 300.0
HEARTBEAT_EVERY_SECONDS = 60.0
ASKED_BEFORE_RUNNING = frozenset({"bash", "task"})
WAITING = frozenset(
    {
        LifecycleState.PROVISIONING,
        LifecycleState.RESTORING,
        LifecycleState.HIBERNATING,
        LifecycleState.HIBERNATED,
    }
)


class SandboxUnavailable(Conflict):
    code = "sandbox_unavailable"


class TurnEngine(Protocol):
    """Runs turns: the durable function on AWS, the SDK's local runtime on one machine."""

    def start(self, run_id: str) -> None:
        """Start the turn's durable execution (named by the run id; a repeat is a no-op)."""
        ...

    def stop(self, run_id: str) -> None:
        """The cancel flag is set: make sure the run ends even if its execution is stuck."""
        ...

    def recover(self) -> int:
        """At start-up: end the runs a previous process left running; how many."""
        ...


@dataclass(frozen=True)
class StreamView:
    run: Run
    events: list[StreamEvent]
    next: int
    continues: UIMessageJson | None = None  # the message the run continues (from seq 0 only)


class Lifecycle(Protocol):
    def activity(self, identity: Identity, session_id: str, turn: str | None) -> Activity: ...


class Resumes(Protocol):
    """A hibernated session brought back (``services/flows/restore.py`` ``Restore``): it moves
    to ``restoring`` and its sandbox's start is kicked."""

    def resume(self, identity: Identity, session_id: str) -> object: ...


class TurnFinished(Protocol):
    """After a turn's natural end (``services/flows/after_turn.py`` ``AfterTurn``): the hold
    released, auto-commit / auto-PR (its entry keyed by the run), the idle loop kicked."""

    def finished(self, identity: Identity, session_id: str, run: Run | None = None) -> Activity: ...


def _entry(
    store: Store,
    ids: IdFactory,
    clock: Clock,
    run: Run,
    kind: Literal["agent.turn_started", "agent.turn_finished"],
) -> bool:
    """The audit entry (and event) of a turn's start or end; whether this call recorded it. A
    failure is logged, never the turn's. The end's entry is keyed by the run (its id from the
    run's, its time the run's end), so a follow-up run again records nothing the second time."""
    detail: dict[str, Any] = {"runId": run.id, "chatId": run.chat_id, "modelId": run.model_id}
    entry_id, at = ids(), clock()
    if kind == "agent.turn_finished":
        detail.update(status=run.status.value, steps=run.steps, usage=run.usage.to_json())
        if run.error:
            detail["error"] = run.error
        entry_id, at = finished_entry_id(run.id), run.finished_at or at
    try:
        entry = AuditEntry(id=entry_id, session_id=run.session_id, at=at, type=kind, detail=detail)
        if not store.append_entry(entry):
            return False  # recorded by an earlier attempt of the same follow-up
    except Exception:
        log.exception("recording %s of run %s", kind, run.id)
        return False
    return True


def finished_entry_id(run_id: str) -> str:
    """The id of the run's ``agent.turn_finished`` entry (one per run)."""
    return f"{run_id}.finished"


def measure(metrics: Metrics, run: Run, kind: Literal["started", "ended"]) -> None:
    """The turn's business metrics: ``AgentTurnStarted``; at its end ``AgentTurn<Status>``
    (``Completed``, ``Aborted``, ``Failed``, ``Waiting``) with its ``AgentTurnSteps`` and tokens."""
    if kind == "started":
        metrics.count("AgentTurnStarted")
        return
    metrics.count(f"AgentTurn{run.status.value.capitalize()}")
    metrics.count("AgentTurnSteps", run.steps)
    metrics.count("AgentInputTokens", run.usage.input_tokens)
    metrics.count("AgentOutputTokens", run.usage.output_tokens)


class AgentTurns:
    def __init__(
        self,
        store: Store,
        runs: RunStore,
        chats: ChatService,
        models: ModelRegistry,
        restore: Resumes,
        engine: Callable[[], TurnEngine],
        clock: Clock,
        ids: IdFactory,
        retention: timedelta,
        loop: AgentLoop,
        *,
        metrics: Metrics,
        attachments: Attachments | None = None,
    ) -> None:
        self._attachments = attachments  # checks a message's file parts before it is stored
        self._retention, self._loop = retention, loop
        self._metrics = metrics
        self._store, self._runs, self._chats = store, runs, chats
        self._models, self._restore, self._engine = models, restore, engine
        self._clock, self._ids = clock, ids

    @property
    def engine(self) -> TurnEngine:
        return self._engine()

    def recover(self) -> int:
        return self._engine().recover()

    # ------------------------------------------------------------------ POST /api/chat

    def _chat(self, identity: Identity, session_id: str, chat_id: str) -> tuple[Session, Chat]:
        session = owned(self._store.get_session(session_id), identity)
        chat = self._store.get_chat(session.id, chat_id)
        if chat is None:
            raise NotFound("Chat not found")
        return session, chat

    def model_for(self, identity: Identity, chat: Chat, requested: str | None) -> ModelInfo:
        """The request's model (400 unless available), else the chat's or the user's when
        available, else the first configured one (400 naming the settings when none is)."""
        if requested:
            return self._models.info(requested)
        preferred = self._store.get_user(identity.user_id).preferences.default_model_id
        for candidate in (chat.model_id, preferred):
            if candidate:
                try:
                    return self._models.info(candidate)
                except ModelUnavailable:
                    continue
        return self._models.default()

    def _check_files(self, identity: Identity, session_id: str, message: Mapping[str, Any]) -> None:
        """The message's file parts: the caller's attachments of the session, under the caps."""
        if self._attachments is not None:
            self._attachments.check_message(identity, session_id, message)
        elif file_parts(message):
            raise InvalidInput("Attachments are not configured", field="message.parts")

    def post(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        message: Mapping[str, Any],
        model_id: str | None,
    ) -> Run:
        if message.get("role") != "user":
            raise InvalidInput("message.role must be user", field="message.role")
        session, chat = self._chat(identity, session_id, chat_id)
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        if session.lifecycle_state in (LifecycleState.FAILED, LifecycleState.ARCHIVED, None):
            raise SandboxUnavailable(
                f"The session's sandbox is unavailable ({session.lifecycle_error or 'failed'})",
                field="sessionId",
            )
        self._check_files(identity, session.id, message)
        model = self.model_for(identity, chat, model_id)
        try:
            engine = self._engine()
        except ValueError as error:  # a deployment without the agent function configured
            raise Unavailable(f"The agent engine is not configured: {error}") from None
        now = self._clock()
        run = Run(
            id=self._ids(),
            session_id=session.id,
            chat_id=chat.id,
            user_id=identity.user_id,
            message_id=str(message["id"]),
            assistant_message_id=self._ids(),
            model_id=model.id,
            started_at=now,
        )
        turn = self._chats.new_message(
            identity, session.id, chat.id, run.message_id, Role.USER, dict(message)
        )
        try:
            started = self._runs.start(run, turn)  # the message and the claim: one write
        except TurnInProgress as busy:
            raise TurnConflict(
                f"Another turn is running in this chat (run {busy.run_id})", field="chatId"
            ) from None
        except (MessageIdTaken, Gone, StorageFull) as error:  # nothing written, no run
            raise message_error(error) from None
        if not started.created:
            return started.run  # the same message again: the run it started
        self._chats.count(Role.USER)
        try:
            if session.lifecycle_state is LifecycleState.HIBERNATED:
                self._restore.resume(identity, session.id)
            engine.start(run.id)
            _entry(self._store, self._ids, self._clock, run, "agent.turn_started")
            measure(self._metrics, run, "started")
        except Exception as error:
            self._runs.finish(
                run.id,
                RunStatus.FAILED,
                at=self._clock(),
                error=getattr(error, "message", None) or "The turn could not start",
                retention=self._retention,
            )
            raise
        return run

    # ------------------------------------------------------------------ stream, stop, runs

    def _latest(self, identity: Identity, chat_id: str) -> Run | None:
        """The caller's chat's latest run; a chat id the caller has not is 404 (another
        user's same id is theirs)."""
        session_id = self._store.chat_session(identity.user_id, chat_id)
        if session_id is None:
            raise NotFound("Chat not found")
        return self._runs.latest(session_id, chat_id)

    def stream(
        self, identity: Identity, chat_id: str, after: int, wait: float | None
    ) -> StreamView | None:
        """The latest run's events after ``after``, waiting up to ``wait`` seconds for one;
        None (204) when there is no run, or it ended and ``after`` is past its last event."""
        run = self._latest(identity, chat_id)
        if run is None:
            return None
        view = self._events(run, after, wait)
        if view is None or after > 0 or run.continued_parts is None:
            return view
        return replace(view, continues=self._continued(run, run.continued_parts))

    def _events(self, run: Run, after: int, wait: float | None) -> StreamView | None:
        budget = min(max(STREAM_DEFAULT_WAIT if wait is None else wait, 0.0), STREAM_MAX_WAIT)
        deadline = time.monotonic() + budget
        while True:
            events = _sized(self._runs.events(run.id, after))
            if events:
                return StreamView(run, events, events[-1].seq)
            if run.status.ended:
                return None if after >= run.last_seq else StreamView(run, [], after)
            if time.monotonic() >= deadline:
                return StreamView(run, [], after)
            time.sleep(STREAM_POLL_SECONDS)
            run = self._runs.get(run.id) or run

    def _continued(self, run: Run, parts: int) -> UIMessageJson | None:
        """The assistant message ``run`` continues with the ``parts`` it had when the run
        started (the later ones are the run's own events; it is the chat's last message while
        the run is its latest, so the newest page holds it)."""
        cursor: str | None = None
        while True:
            page = self._store.list_messages(
                run.session_id, run.chat_id, MESSAGES_PAGE, cursor, before=True
            )
            for message in page.items:
                if message.id == run.assistant_message_id:
                    stored = message.parts.get("parts")
                    kept = list(stored)[:parts] if isinstance(stored, list) else []
                    return {**message.parts, "parts": kept}
            if page.cursor is None:
                return None
            cursor = page.cursor

    def stop(self, identity: Identity, chat_id: str) -> Run | None:
        run = self._latest(identity, chat_id)
        if run is None or run.status.ended:
            return run
        if self._runs.request_cancel(run.id):
            self._engine().stop(run.id)
        return self._runs.get(run.id)

    def respond(
        self,
        identity: Identity,
        chat_id: str,
        tool_call_id: str,
        *,
        approved: bool | None,
        reason: str | None,
        answers: JsonValue | None,
    ) -> tuple[Run, int]:
        """Answer an approval or a question of the chat's waiting turn. Once nothing else
        waits, a new run continues the same assistant message: ``(that run, 0)``; else
        ``(the waiting run, how many still wait)``."""
        last = self._latest(identity, chat_id)
        if last is None:
            raise NotFound("The chat has no turn to answer", field="toolCallId")
        if not last.status.ended:
            raise TurnConflict("A turn is running in this chat", field="chatId")
        if last.status is not RunStatus.WAITING:
            raise InvalidInput(
                "The chat's last turn is not waiting for an answer", field="toolCallId"
            )
        answered = self._loop.answer(
            last, tool_call_id, approved=approved, reason=reason, answers=answers
        )
        if answered.pending:
            return last, answered.pending
        run = Run(
            id=self._ids(),
            session_id=last.session_id,
            chat_id=last.chat_id,
            user_id=identity.user_id,
            message_id=f"{last.id}:{tool_call_id}",
            assistant_message_id=last.assistant_message_id,
            model_id=last.model_id,
            started_at=self._clock(),
            continued_parts=answered.parts,
        )
        try:
            started = self._runs.start(run)
        except TurnInProgress as busy:
            raise TurnConflict(
                f"Another turn is running in this chat (run {busy.run_id})", field="chatId"
            ) from None
        if started.created:
            session = self._store.get_session(run.session_id)
            if session is not None and session.lifecycle_state is LifecycleState.HIBERNATED:
                self._restore.resume(identity, session.id)
            self._engine().start(run.id)
            _entry(self._store, self._ids, self._clock, run, "agent.turn_started")
            measure(self._metrics, run, "started")
        return started.run, 0

    def runs(self, identity: Identity, session_id: str, cursor: str | None) -> Page[Run]:
        session = owned(self._store.get_session(session_id), identity)
        try:
            return self._runs.list_for_session(session.id, RUNS_PAGE, cursor)
        except BadCursor:
            raise InvalidInput("Invalid cursor", field="cursor") from None

    def models(self) -> tuple[tuple[ModelInfo, ...], str | None]:
        """The available models and the default's id (None, with no model configured)."""
        available = self._models.available()
        return available, available[0].id if available else None


class AgentHost(TurnHost):
    """The loop's side of the product: messages through the store, the session's sandbox,
    hibernation held off while the turn runs, auto-commit after a natural finish."""

    def __init__(
        self,
        store: Store,
        sandboxd: SandboxdClients,
        lifecycle: Lifecycle,
        clock: Clock,
        *,
        ids: IdFactory,
        metrics: Metrics,
        after_turn: TurnFinished,
        restore: Resumes,
        refresh_diff: Callable[[Identity, str], object] | None = None,
        refresh_pr: Callable[[str], object] | None = None,
        sandbox_wait_seconds: float = SANDBOX_WAIT_SECONDS,
        attachments: AttachmentFiles | None = None,
    ) -> None:
        self._after_turn, self._restore = after_turn, restore
        self._attachments = attachments
        self._ids, self._refresh_diff = ids, refresh_diff
        self._metrics = metrics
        self._refresh_pr = refresh_pr  # branch and PR state (check-pr), after the auto-commit
        self._store, self._sandboxd, self._lifecycle = store, sandboxd, lifecycle
        self._clock = clock
        self._wait = sandbox_wait_seconds
        self._beats: dict[str, float] = {}
        self._lock = threading.Lock()

    def _session(self, run: Run) -> Session:
        session = self._store.get_session(run.session_id)
        if session is None:
            raise SandboxError("the session is gone")
        return session

    def messages(self, run: Run) -> list[UIMessageJson]:
        found: list[UIMessageJson] = []
        cursor: str | None = None
        while True:
            page = self._store.list_messages(run.session_id, run.chat_id, 500, cursor)
            found += [message.parts for message in page.items]
            if page.cursor is None:
                return found
            cursor = page.cursor

    def save(self, run: Run, message: AssistantMessage) -> None:
        stored = self.stored(run, message)
        self._store.put_message(stored.session, stored.chat, stored.message, activity=None)

    def stored(self, run: Run, message: AssistantMessage) -> TurnMessage:
        session = self._session(run)
        chat = self._store.get_chat(session.id, run.chat_id)
        if chat is None:
            raise SandboxError("the chat is gone")
        stored = Message(
            id=message.id,
            chat_id=chat.id,
            role=Role.ASSISTANT,
            parts=message.to_json(),
            created_at=self._clock(),  # after the user message (an upsert keeps the first)
        )
        return TurnMessage(session, chat, stored, activity=None)

    def attachment(self, run: Run, url: str) -> AttachmentFile | None:
        """The run's user's attachment (read at the model step, never kept in the message)."""
        if self._attachments is None:
            return None
        return self._attachments.read(run.user_id, url)

    def workspace(self, run: Run) -> Workspace:
        """The session's sandbox, once it is active (a resumed session comes up first)."""
        deadline = time.monotonic() + self._wait
        while True:
            session = self._session(run)
            state = session.lifecycle_state
            if state is LifecycleState.ACTIVE and session.sandbox:
                return WorkspaceClient(self._sandboxd(session.sandbox))
            if state not in WAITING or time.monotonic() > deadline:
                raise SandboxError(f"the session's sandbox is not running ({state or 'none'})")
            if state is LifecycleState.HIBERNATED:  # it hibernated meanwhile: bring it back
                try:
                    self._restore.resume(self._identity(run), run.session_id)
                except DomainError as error:
                    raise SandboxError(f"the session's sandbox cannot resume: {error}") from None
            time.sleep(0.5)

    def project(self, run: Run) -> Project:
        session = self._session(run)
        repo = (
            f"{session.repo_owner}/{session.repo_name}"
            if session.repo_owner and session.repo_name
            else session.clone_url
        )
        return Project(repository=repo, branch=session.branch)

    def _identity(self, run: Run) -> Identity:
        return Identity(user_id=run.user_id)

    def untitled(self, run: Run) -> str | None:
        session = self._store.get_session(run.session_id)
        chat = self._store.get_chat(run.session_id, run.chat_id)
        if session is None or chat is None:
            return None
        if TitleSource.AUTO not in (session.title_source, chat.title_source):
            return None
        first = self._store.list_messages(run.session_id, run.chat_id, 1, None).items
        if not first or first[0].id != run.message_id or first[0].role is not Role.USER:
            return None  # not the chat's first turn
        parts = first[0].parts.get("parts")
        texts = parts if isinstance(parts, list) else []
        text = " ".join(
            str(part.get("text", ""))
            for part in texts
            if isinstance(part, dict) and part.get("type") == "text"
        )
        return text.strip() or None

    def retitle(self, run: Run, title: str) -> None:
        session = self._store.get_session(run.session_id)
        if (
            session is not None
            and session.title_source is TitleSource.AUTO
            and title != session.title
        ):
            detail = {"title": title, "titleSource": TitleSource.GENERATED.value}
            entry = AuditEntry(
                id=self._ids(),
                session_id=session.id,
                at=self._clock(),
                type="session.renamed",
                detail=detail,
            )
            self._store.title_session(session, title, entry)
        chat = self._store.get_chat(run.session_id, run.chat_id)
        if chat is not None and chat.title_source is TitleSource.AUTO:
            self._store.title_chat(chat, title)

    def approval(self, run: Run, tool: str) -> str | None:
        """The session's "ask before running" setting, read at each call (a change applies to
        the next one). ``task`` too: its subagent runs commands it cannot ask about."""
        if tool not in ASKED_BEFORE_RUNNING:
            return None
        session = self._store.get_session(run.session_id)
        if session is None or not session.ask_before_bash:
            return None
        return "This session asks before running every command"

    def heartbeat(self, run: Run) -> None:
        """Hold hibernation off, at most once a minute. A beat that did not take (the session
        not active yet: a turn that resumes it) is not counted: the next step beats again."""
        now = time.monotonic()
        with self._lock:
            if now - self._beats.get(run.id, -HEARTBEAT_EVERY_SECONDS) < HEARTBEAT_EVERY_SECONDS:
                return
            self._beats[run.id] = now
        held = False
        try:
            answer = self._lifecycle.activity(self._identity(run), run.session_id, "start")
            held = answer.success
        except Exception:  # a missed heartbeat must not fail the turn
            log.exception("heartbeat of run %s", run.id)
        if not held:
            with self._lock:
                self._beats.pop(run.id, None)

    def ended(self, run: Run) -> None:
        """The turn-end follow-ups, each idempotent (a crash may run them again, and a stop
        that was not honoured runs them beside the turn's own step): the audit entry and event
        are keyed by the run and recorded once (the auto-commit's entry too), the metrics counted
        only by the call that recorded them; the session's activity, auto-commit, diff and PR
        refresh find nothing left to do the second time."""
        with self._lock:
            self._beats.pop(run.id, None)
        if _entry(self._store, self._ids, self._clock, run, "agent.turn_finished"):
            measure(self._metrics, run, "ended")
        if run.status is RunStatus.COMPLETED:  # a natural finish: auto-commit / auto-PR
            self._after_turn.finished(self._identity(run), run.session_id, run)
            if self._refresh_diff is not None:  # the cached diff (and the session's line counts)
                try:
                    self._refresh_diff(self._identity(run), run.session_id)
                except Exception:
                    log.exception("refreshing the diff after run %s", run.id)
        else:  # stopped, waiting or failed: the hold is released, with no auto-commit
            self._lifecycle.activity(self._identity(run), run.session_id, "release")
        if self._refresh_pr is not None:  # after any turn (and its auto-commit); never fails it
            try:
                self._refresh_pr(run.session_id)
            except Exception:
                log.exception("refreshing the PR after run %s", run.id)


def _sized(events: list[StreamEvent]) -> list[StreamEvent]:
    """The events from the first up to ``STREAM_PAGE_BYTES`` of chunks (at least one): a long
    turn's ``after=0`` is read in pages, each ending where its ``next`` says."""
    size = 0
    for index, event in enumerate(events):
        size += len(json.dumps(event.chunk, separators=(",", ":")))
        if index and size > STREAM_PAGE_BYTES:
            return events[:index]
    return events
