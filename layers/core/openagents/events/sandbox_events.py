"""The events of a session's sandbox: provisioning, hibernation, restore, loss, auto-commit."""

from __future__ import annotations

from typing import Literal

from pydantic import MISSING, Field

from openagents.events.envelope import CODE, Envelope, Failed, Transition


class SandboxStarting(Envelope):
    """A sandbox generation was started by the provisioning workflow."""

    type: Literal["sandbox.starting"]
    name: Literal["Sandbox Starting"]
    generation: int = Field(ge=0, description="The generation being started.")


class SandboxProvisioned(Transition):
    """A new sandbox is provisioned and active."""

    type: Literal["sandbox.active"]
    name: Literal["Sandbox Provisioned"]
    to: Literal["active"]
    generation: int = Field(ge=0, description="The generation now running.")


class SandboxFailed(Envelope):
    """Provisioning failed (to `failed`), or a restore failed (back to `hibernated`, the
    snapshot kept)."""

    type: Literal["sandbox.failed"]
    name: Literal["Sandbox Failed"]
    error: str = Field(
        description="The readable error (`Provisioning failed: …` / `Restore failed: …`)."
    )
    code: str | MISSING = Field(default=MISSING, description=CODE)
    to: Literal["failed", "hibernated"]


class SandboxRetry(Envelope):
    """A failed provisioning is retried with a new sandbox generation (`POST /api/sandbox`)."""

    type: Literal["sandbox.retry"]
    name: Literal["Sandbox Retry"]


class SandboxWaiting(Envelope):
    """Provisioning waits for capacity: AWS refused to start the sandbox for now (RunTask
    throttled, the Fargate vCPU quota reached, no capacity or no free ENI) and the workflow
    retries with backoff; written once per generation, not per retry."""

    type: Literal["sandbox.waiting"]
    name: Literal["Sandbox Waiting"]
    generation: int = Field(ge=0, description="The sandbox generation waiting to start.")
    reason: str = Field(max_length=500, description="What AWS answered (capped at 500 characters).")


class SandboxHibernating(Transition):
    """The lifecycle loop started a hibernation (idle or expired)."""

    type: Literal["sandbox.hibernating"]
    name: Literal["Sandbox Hibernating"]


class SandboxHibernated(Transition):
    """A verified snapshot was taken and the sandbox stopped."""

    type: Literal["sandbox.hibernated"]
    name: Literal["Sandbox Hibernated"]
    snapshot_bytes: int = Field(ge=0, description="Size of the snapshot.")
    snapshot_id: str = Field(description="The snapshot's id (driver-specific).")


class SandboxSnapshotFailed(Failed):
    """The snapshot or its verification failed; the sandbox keeps running (`lifecycleError`
    set)."""

    type: Literal["sandbox.snapshot_failed"]
    name: Literal["Sandbox Snapshot Failed"]


class SandboxHibernateAborted(Transition):
    """Activity arrived while the snapshot was taken; the sandbox stays active."""

    type: Literal["sandbox.hibernate_aborted"]
    name: Literal["Sandbox Hibernate Aborted"]


class SandboxHibernateFailed(Failed):
    """Hibernation retries were exhausted; the sandbox stays active and hibernation is tried
    again later."""

    type: Literal["sandbox.hibernate_failed"]
    name: Literal["Sandbox Hibernate Failed"]


class SandboxPauseRequested(Transition):
    """The user asked to hibernate now (`POST /api/sandbox/snapshot`)."""

    type: Literal["sandbox.pause_requested"]
    name: Literal["Sandbox Pause Requested"]


class SandboxRestoring(Transition):
    """A resume started a restore from the snapshot (`PUT /api/sandbox/snapshot`)."""

    type: Literal["sandbox.restoring"]
    name: Literal["Sandbox Restoring"]


class SandboxResumed(Transition):
    """A restored sandbox is active."""

    type: Literal["sandbox.resumed"]
    name: Literal["Sandbox Resumed"]
    to: Literal["active"]
    generation: int = Field(ge=0, description="The generation now running.")


class SandboxExtended(Transition):
    """The sandbox's lifetime was extended (`POST /api/sandbox/extend`)."""

    type: Literal["sandbox.extended"]
    name: Literal["Sandbox Extended"]
    seconds: int = Field(ge=1, description="Seconds added to `sandboxExpiresAt`.")


class SandboxLost(Transition):
    """The sandbox died on its own (unreachable, or the one-machine runtime restarted): back to
    `hibernated` with a snapshot, else `failed`."""

    type: Literal["sandbox.lost"]
    name: Literal["Sandbox Lost"]
    reason: str = Field(description="Why the sandbox counts as lost.")
    code: str | MISSING = Field(default=MISSING, description=CODE)
    snapshot_at: str | MISSING | None = Field(
        default=MISSING,
        description="When the snapshot it goes back to was taken; null without a snapshot.",
    )


class SandboxRunRescued(Envelope):
    """The reconciler replaced a lifecycle run that was lost (its lease more than 2 minutes past
    due)."""

    type: Literal["sandbox.run_rescued"]
    name: Literal["Sandbox Run Rescued"]
    stale_run: str = Field(description="The lost run's lease (lifecycleRunId).")
    state: str = Field(description="The lifecycle state the session was in.")


class SandboxAutoCommit(Envelope):
    """An agent ended a turn (`POST /api/sandbox/activity {turn: end}`) with auto-commit on: the
    outcome of commit, push and (auto-PR on) the pull request. Fields without a value are left
    out; `skipped` says why nothing (more) happened."""

    type: Literal["sandbox.auto_commit"]
    name: Literal["Sandbox Auto Commit"]
    skipped: str | MISSING = Field(
        default=MISSING,
        description="Why the flow stopped: no running sandbox, detached HEAD, the default "
        "branch, nothing to commit or push, a failed commit or push, a sandbox error.",
    )
    branch: str | MISSING = Field(default=MISSING, description="The session's branch.")
    base: str | MISSING = Field(
        default=MISSING, description="The repository's default branch (the PR's base)."
    )
    committed: bool | MISSING = Field(
        default=MISSING, description="A commit was made of uncommitted changes."
    )
    commit: str | MISSING = Field(default=MISSING, description="The new commit's sha.")
    pushed: bool | MISSING = Field(default=MISSING, description="The branch was pushed.")
    pr: str | MISSING = Field(
        default=MISSING,
        description="`skipped: <reason>` when the PR could not be created or synced.",
    )
    pr_number: int | MISSING = Field(
        default=MISSING, ge=1, description="The created or synced PR's number."
    )
    pr_url: str | MISSING = Field(default=MISSING, description="The PR's web address.")


SANDBOX_EVENTS = (
    SandboxStarting,
    SandboxProvisioned,
    SandboxFailed,
    SandboxRetry,
    SandboxWaiting,
    SandboxHibernating,
    SandboxHibernated,
    SandboxSnapshotFailed,
    SandboxHibernateAborted,
    SandboxHibernateFailed,
    SandboxPauseRequested,
    SandboxRestoring,
    SandboxResumed,
    SandboxExtended,
    SandboxLost,
    SandboxRunRescued,
    SandboxAutoCommit,
)
