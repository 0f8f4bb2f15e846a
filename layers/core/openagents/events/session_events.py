"""The events of a session's own record: created, renamed, settings, archive, pull request."""

from __future__ import annotations

from typing import Literal

from pydantic import MISSING, Field

from openagents.events.envelope import CODE, STATES, Envelope

PrStatus = Literal["merged", "closed", "open"]


class SessionCreated(Envelope):
    """A session was created (`POST /api/sessions`)."""

    type: Literal["session.created"]
    name: Literal["Session Created"]
    title: str = Field(description="The session's title.")


class SessionRenamed(Envelope):
    """The session's title changed (`PATCH /api/sessions/{id}`, or a title generated from the
    first user message: `titleSource` `generated`)."""

    type: Literal["session.renamed"]
    name: Literal["Session Renamed"]
    title: str = Field(description="The new title.")
    title_source: Literal["generated"] | MISSING = Field(
        default=MISSING,
        description="Present when the title was generated from the first user message "
        "(docs/agent.md, Generated titles); absent for a user's rename.",
    )


class SessionSettingsChanged(Envelope):
    """A session setting changed (`PATCH /api/sessions/{id}`): `askBeforeBash`, whether every
    bash command (and subagent task) waits for the user's approval."""

    type: Literal["session.settings_changed"]
    name: Literal["Session Settings Changed"]
    ask_before_bash: bool = Field(
        description="The new setting: true, every bash command and task call waits for "
        "approval (docs/agent.md, Approvals)."
    )


class SessionArchived(Envelope):
    """The session was archived (`PATCH {status: archived}`, a closed PR, auto-archive). The
    rule `archive-finalizer` matches `detail.finalize: [true]` and invokes the archiver."""

    type: Literal["session.archived"]
    name: Literal["Session Archived"]
    from_: str | MISSING = Field(
        default=MISSING, alias="from", description=f"Lifecycle state before ({STATES})."
    )
    to: Literal["archived"] | MISSING = MISSING
    generation: int | MISSING = Field(
        default=MISSING, ge=0, description="The session's sandbox generation at the transition."
    )
    finalize: bool | MISSING = Field(
        default=MISSING,
        description="True when a sandbox or a snapshot remains to be finalised (bundled, "
        "stopped, deleted). Absent means false.",
    )
    pr_status: PrStatus | MISSING | None = Field(
        default=MISSING, description="The PR status after the refresh, null without a PR."
    )


class SessionArchiveFinalized(Envelope):
    """Archive finalisation finished: bundle stored, sandbox stopped, snapshot deleted, sandbox
    state cleared."""

    type: Literal["session.archive_finalized"]
    name: Literal["Session Archive Finalized"]
    generation: int = Field(ge=0, description="The session's sandbox generation at the transition.")
    bundle: str | MISSING | None = Field(
        default=MISSING,
        description="The artifact-store key of the git bundle "
        "(`bundles/<sessionId>/<generation>.bundle`); null when the session had no repository.",
    )


class SessionArchiveFailed(Envelope):
    """Archive finalisation failed; `lifecycleError` is set and the invocation is retried. The
    snapshot and sandbox are kept."""

    type: Literal["session.archive_failed"]
    name: Literal["Session Archive Failed"]
    generation: int = Field(ge=0, description="The session's sandbox generation at the transition.")
    error: str = Field(
        description="`Archive finalization failed: <message>` (at most 1000 characters)."
    )
    code: str | MISSING = Field(default=MISSING, description=CODE)


class SessionUnarchived(Envelope):
    """The session was unarchived (`PATCH {status: running}`)."""

    type: Literal["session.unarchived"]
    name: Literal["Session Unarchived"]
    generation: int | MISSING = Field(
        default=MISSING, ge=0, description="The session's sandbox generation at the transition."
    )
    from_: Literal["archived"] | MISSING = Field(default=MISSING, alias="from")
    to: str | MISSING = Field(
        default=MISSING,
        description="provisioning (from the bundle or a fresh clone), restoring (from a "
        "snapshot) or active (a sandbox still running).",
    )
    from_bundle: str | MISSING | None = Field(
        default=MISSING,
        description="The bundle key the next sandbox is provisioned from, null without a bundle.",
    )


class SessionPrMerged(Envelope):
    """The session's pull request was merged through `POST /api/sessions/{id}/merge`; the
    server then archives the session (a `session.archived` follows)."""

    type: Literal["session.pr_merged"]
    name: Literal["Session PR Merged"]
    pr_number: int = Field(description="The pull request's number.")
    pr_status: PrStatus = Field(description="Its status after the call.")
    method: Literal["merge", "squash", "rebase"] | MISSING = Field(
        default=MISSING, description="The merge method asked for."
    )


class SessionPrClosed(Envelope):
    """The session's pull request was closed without merging through
    `POST /api/sessions/{id}/close-pr`."""

    type: Literal["session.pr_closed"]
    name: Literal["Session PR Closed"]
    pr_number: int = Field(description="The pull request's number.")
    pr_status: PrStatus = Field(description="Its status after the call.")


class SessionRepositoryAttached(Envelope):
    """A session started without a repository gained one (`POST
    /api/sessions/{id}/repository`): its work was pushed to the session's own branch there."""

    type: Literal["session.repository_attached"]
    name: Literal["Session Repository Attached"]
    repo_url: str = Field(description="The repository's clone URL (no credentials).")
    repo_owner: str | MISSING = Field(
        default=MISSING, description="Its owner (GitHub); absent for a local repository."
    )
    repo_name: str | MISSING = Field(default=MISSING, description="Its name.")
    branch: str = Field(description="The session's own branch, named by the control plane.")
    commit: str = Field(description="The commit pushed to that branch.")
    created: bool = Field(description="True when the repository was created for the session.")


SESSION_EVENTS = (
    SessionCreated,
    SessionRenamed,
    SessionSettingsChanged,
    SessionArchived,
    SessionArchiveFinalized,
    SessionArchiveFailed,
    SessionUnarchived,
    SessionPrMerged,
    SessionPrClosed,
    SessionRepositoryAttached,
)
