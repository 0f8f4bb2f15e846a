"""Sandboxes: provisioning kick, and the sandbox tools (exec, files, git, diff)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from functions.api.deps import App, Caller
from functions.api.schemas import (
    CachedDiffOut,
    DiffOut,
    EnsureSandboxIn,
    EnsureSandboxOut,
    ErrorOut,
    ExecIn,
    ExecOut,
    FileContentOut,
    FilesOut,
    GitStatusOut,
)

router = APIRouter(prefix="/api", tags=["sandbox"])
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 404, 409, 422, 503)
}
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


@router.post(f"{TOOLS}/exec", responses=ERRORS)
def sandbox_exec(session_id: str, body: ExecIn, app: App, caller: Caller) -> ExecOut:
    """Run a command in the workspace (409 `sandbox_not_running` when it is not running)."""
    result = app.sandbox_tools.exec(caller, session_id, **body.model_dump())
    return ExecOut.model_validate(result)


@router.get(f"{TOOLS}/files", responses=ERRORS)
def sandbox_files(
    session_id: str,
    app: App,
    caller: Caller,
    path: Annotated[str, Query(max_length=4096)] = ".",
    depth: Annotated[int, Query(ge=1, le=5)] = 1,
) -> FilesOut:
    return FilesOut.model_validate(app.sandbox_tools.files(caller, session_id, path, depth))


@router.get(f"{TOOLS}/files/content", responses=ERRORS)
def sandbox_file_content(
    session_id: str,
    app: App,
    caller: Caller,
    path: Annotated[str, Query(min_length=1, max_length=4096)],
    max_bytes: Annotated[int, Query(alias="maxBytes", ge=1, le=5_242_880)] = 1_048_576,
) -> FileContentOut:
    content = app.sandbox_tools.file_content(caller, session_id, path, max_bytes)
    return FileContentOut.model_validate(content)


@router.get(f"{TOOLS}/git-status", responses=ERRORS)
def sandbox_git_status(session_id: str, app: App, caller: Caller) -> GitStatusOut:
    return GitStatusOut.model_validate(app.sandbox_tools.git_status(caller, session_id))


@router.get(f"{TOOLS}/diff", responses=ERRORS)
def sandbox_diff(session_id: str, app: App, caller: Caller) -> DiffOut:
    """The workspace diff against the default branch; cached with line counts on the session."""
    return DiffOut.model_validate(app.sandbox_tools.diff(caller, session_id))


@router.get(f"{TOOLS}/diff/cached", responses=ERRORS)
def sandbox_cached_diff(session_id: str, app: App, caller: Caller) -> CachedDiffOut:
    """The last computed diff, for a paused or archived session (404 when none)."""
    diff, cached_at = app.sandbox_tools.cached_diff(caller, session_id)
    return CachedDiffOut(data=DiffOut.model_validate(diff), cached_at=cached_at)
