"""Sandboxes: provisioning kick, and the sandbox tools (exec, files, git, diff)."""

import asyncio
import dataclasses
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from openagents.domain.lifecycle import snapshot_ref
from starlette.concurrency import run_in_threadpool

from functions.api.deps import App, Caller
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import (
    ActivityIn,
    ActivityOut,
    CachedDiffOut,
    DiffOut,
    EnsureSandboxIn,
    EnsureSandboxOut,
    ExecIn,
    ExecOut,
    ExtendOut,
    FileContentOut,
    FilesOut,
    GitStatusOut,
    LifecycleTimes,
    PauseOut,
    ResumeOut,
    SandboxStatusOut,
    SessionRef,
    SnapshotInfo,
    error_responses,
)
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute, prefix="/api", tags=["sandbox"], dependencies=[Depends(known_query)]
)
ERRORS = error_responses(409)
TOOLS = "/sessions/{session_id}/sandbox"


@router.post("/sandbox", responses=ERRORS)
def ensure_sandbox(body: EnsureSandboxIn, app: App, caller: Caller) -> EnsureSandboxOut:
    """Provision the session's sandbox if it has none yet (re-kick) or failed (retry)."""
    session, kick = app.provisioning.ensure(caller, body.session_id)
    return EnsureSandboxOut(
        session_id=session.id,
        lifecycle_state=session.lifecycle_state,
        provisioning_started=bool(kick and kick.started),
        generation=kick.generation if kick else None,
    )


@router.post(f"{TOOLS}/exec", responses=error_responses(409, 429))
async def sandbox_exec(session_id: str, body: ExecIn, app: App, caller: Caller) -> ExecOut:
    """Run a command in the workspace (409 `sandbox_not_running` when it is not running;
    429 `too_many_commands` with `Retry-After` over the concurrent-command caps)."""
    # The session check borrows a request thread briefly; the command runs on the exec pool's
    # own threads, so a long command never holds the threads other requests need.
    started = await run_in_threadpool(
        app.sandbox_tools.submit_exec, caller, session_id, **body.model_dump()
    )
    result = await asyncio.wrap_future(started)
    return ExecOut.model_validate(dataclasses.asdict(result))


@router.get(f"{TOOLS}/files", responses=ERRORS)
def sandbox_files(
    session_id: str,
    app: App,
    caller: Caller,
    path: Annotated[str, Query(max_length=4096)] = ".",
    depth: Annotated[int, Query(ge=1, le=5)] = 1,
) -> FilesOut:
    listing = app.sandbox_tools.files(caller, session_id, path, depth)
    return FilesOut.model_validate(dataclasses.asdict(listing))


@router.get(f"{TOOLS}/files/content", responses=ERRORS)
def sandbox_file_content(
    session_id: str,
    app: App,
    caller: Caller,
    path: Annotated[str, Query(min_length=1, max_length=4096)],
    max_bytes: Annotated[int, Query(alias="maxBytes", ge=1, le=5_242_880)] = 1_048_576,
) -> FileContentOut:
    content = app.sandbox_tools.file_content(caller, session_id, path, max_bytes)
    return FileContentOut.model_validate(dataclasses.asdict(content))


@router.get(f"{TOOLS}/git-status", responses=ERRORS)
def sandbox_git_status(session_id: str, app: App, caller: Caller) -> GitStatusOut:
    status = app.sandbox_tools.git_status(caller, session_id)
    return GitStatusOut.model_validate(dataclasses.asdict(status))


@router.get(f"{TOOLS}/diff", responses=ERRORS)
def sandbox_diff(session_id: str, app: App, caller: Caller) -> DiffOut:
    """The workspace diff against the default branch; cached with line counts on the session."""
    return DiffOut.model_validate(dataclasses.asdict(app.sandbox_tools.diff(caller, session_id)))


@router.get(f"{TOOLS}/diff/cached", responses=ERRORS)
def sandbox_cached_diff(session_id: str, app: App, caller: Caller) -> CachedDiffOut:
    """The last computed diff, for a paused or archived session (404 when none)."""
    diff, cached_at = app.sandbox_tools.cached_diff(caller, session_id)
    return CachedDiffOut(data=DiffOut.model_validate(dataclasses.asdict(diff)), cached_at=cached_at)


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


@router.get("/sandbox/status", responses=ERRORS)
async def sandbox_status(
    app: App, caller: Caller, session_id: Annotated[str, Query(alias="sessionId", min_length=1)]
) -> SandboxStatusOut:
    """The status chip (polled every 15 s): one read, never refreshes activity; kicks a
    lifecycle run when the session is overdue and has none."""
    # the read runs on the event loop (the hottest route skips the thread pool's hop); the
    # rare kick, which starts a workflow, on a thread
    view = app.lifecycle.status(caller, session_id)
    if view.overdue:
        await run_in_threadpool(app.lifecycle.kick_overdue, view.session)
    session, snapshot = view.session, view.session.snapshot
    return SandboxStatusOut(
        status=view.status.value,
        has_snapshot=bool(snapshot),
        lifecycle_version=session.lifecycle_version,
        lifecycle=LifecycleTimes(
            server_time=_ms(view.server_time) or 0,
            state=session.lifecycle_state,
            last_activity_at=_ms(session.last_activity_at),
            hibernate_after=_ms(session.hibernate_after),
            sandbox_expires_at=_ms(session.sandbox_expires_at),
            error=session.lifecycle_error,
            error_code=session.lifecycle_error_code,
        ),
        snapshot=SnapshotInfo(
            id=snapshot_ref(snapshot.id),
            created_at=_ms(snapshot.created_at) or 0,
            size_bytes=snapshot.size_bytes,
        )
        if snapshot
        else None,
    )


@router.post("/sandbox/activity", responses=ERRORS)
def sandbox_activity(body: ActivityIn, app: App, caller: Caller) -> ActivityOut:
    """Activity moves `hibernateAfter` (only while active); `turn: start` from an agent holds
    hibernation off for a bounded heartbeat, `turn: end` releases it."""
    if body.turn == "end":  # a turn's natural end: auto-commit / auto-PR (services/flows/)
        done = app.after_turn.finished(caller, body.session_id)
    else:
        done = app.lifecycle.activity(caller, body.session_id, body.turn)
    return ActivityOut(success=done.success, reason=done.reason, auto_commit=done.after_turn)


@router.post("/sandbox/extend", responses=ERRORS)
def sandbox_extend(body: SessionRef, app: App, caller: Caller) -> ExtendOut:
    """Add the extend step (20 min) to the sandbox's hard lifetime."""
    session = app.lifecycle.extend(caller, body.session_id)
    return ExtendOut(
        expires_at=_ms(session.sandbox_expires_at) or 0,
        extended_by=app.settings.extend_seconds * 1000,
    )


@router.post("/sandbox/snapshot", status_code=202, responses=ERRORS)
def sandbox_pause(body: SessionRef, app: App, caller: Caller) -> PauseOut:
    """Hibernate now: snapshot, verify, stop (asynchronous; poll the status)."""
    session = app.lifecycle.pause(caller, body.session_id)
    return PauseOut(hibernating=session.lifecycle_state is not None)


@router.put("/sandbox/snapshot", responses=ERRORS)
def sandbox_resume(body: SessionRef, app: App, caller: Caller) -> ResumeOut:
    """Resume from the snapshot into a new sandbox generation (asynchronous; poll the status).
    404 "No sandbox available for resume" when there is no snapshot."""
    result = app.restore.resume(caller, body.session_id)  # services/flows/restore.py
    return ResumeOut(
        already_running=result.already_running,
        restoring=result.restoring,
        restored_from=result.restored_from,
    )
