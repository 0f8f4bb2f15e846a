"""Archive: the synchronous part (git/PR refresh, mark archived), the asynchronous finalisation
(git bundle to the artifact store, stop the sandbox, drop the snapshot), and unarchive's own step
(a closed PR's webhook archives through ``services/pull_requests.py``). It calls no other
service: the unarchive flow (``services/flows/unarchive.py``) starts the next sandbox or the idle
loop, and the sandbox-ready flow restores the bundle into it (``restore_workspace``). Every move
goes through ``services/transitions.py``: a conditional write with an audit entry and its outbox
event (``docs/archive.md``)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from openagents.domain.errors import Conflict
from openagents.domain.lifecycle import Failure, LifecycleFields, with_due
from openagents.domain.models import (
    AuditEntry,
    BundleRef,
    LifecycleState,
    PrStatus,
    Session,
    SessionStatus,
    pr_key,
)
from openagents.git import GitHost
from openagents.sandbox.git_answers import GitPlace, GitRemote
from openagents.sandbox.port import (
    Sandboxd,
    SandboxdClients,
    SandboxDriver,
    SandboxError,
    SandboxHandle,
    SandboxState,
)
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.transitions import Change, Entry, Transitions
from openagents.settings import Settings
from openagents.store.port import StaleState, Store

log = logging.getLogger(__name__)
ARCHIVED = frozenset({LifecycleState.ARCHIVED})
LIVE = frozenset({LifecycleState.ACTIVE, LifecycleState.HIBERNATING})
ARCHIVER_GENERATION_STEP = 2  # past a kicked, not yet started generation (see _temporary_sandbox)


MAX_BUNDLE_BYTES = 2 << 30  # an archive bundle larger than this is refused (it is held in memory)
ERROR_PREFIX = "Archive finalization failed: "


def _key(bundle: BundleRef | None) -> str | None:
    return bundle.key if bundle else None


@dataclass(frozen=True)
class Finalized:
    """The finalisation's outcome: done (with the bundle's key, None without a repository),
    or nothing done and why."""

    finalized: bool
    bundle: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class AutoArchived:
    stale: int  # sessions hibernated longer than the setting
    archived: int


class ArchiveFailed(Exception):
    """Finalisation failed; the error is recorded on the session and the caller retries."""


class ArtifactBytes(Protocol):
    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...
    def delete(self, key: str) -> None: ...


def bundle_key(session_id: str, generation: int) -> str:
    return f"bundles/{session_id}/{generation}.bundle"


def git_identity(session: Session) -> tuple[str, str]:
    """(name, email) of the session's commits."""
    return (
        session.owner_name or session.user_id,
        session.owner_email or f"{session.user_id}@users.noreply.openagents.local",
    )


def save_bundle(client: Sandboxd, session: Session) -> tuple[bytes, GitPlace, GitRemote] | None:
    """Keep the uncommitted work on refs/openagents/archive/ and read a bundle of every ref,
    with where HEAD and origin pointed; None when the workspace is no git repository."""
    try:
        place = client.git_archive()
    except SandboxError as exc:
        if exc.code == "not_a_repository":
            return None
        raise
    remote = client.git_remote()
    return client.git_bundle(max_bytes=MAX_BUNDLE_BYTES), place, remote


def restore_bundle(client: Sandboxd, session: Session, ref: BundleRef, data: bytes) -> str:
    """Rebuild the workspace's repository from an archive bundle; returns the branch (or the
    detached commit)."""
    name, email = git_identity(session)
    restored = client.git_bundle_restore(
        data,
        place=GitPlace(branch=ref.branch, head=ref.head),
        remote=GitRemote(default_branch=None, origin_head=ref.origin_head, upstream=ref.upstream),
        clone_url=session.clone_url,
        git_name=name,
        git_email=email,
    )
    return restored.branch or restored.head or ""


class ArchiveService:
    def __init__(
        self,
        store: Store,
        driver: SandboxDriver,
        workspaces: SandboxdClients,
        artifacts: ArtifactBytes,
        git_host: GitHost | None,
        settings: Settings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._driver = driver
        self._workspaces = workspaces
        self._artifacts = artifacts
        self._git_host = git_host
        self._settings = settings
        self._clock = clock
        self._ids = ids
        self._metrics = metrics
        # clock and ids read through the service: a test that sets them sets the moves' too
        self._transitions = Transitions(store, lambda: self._clock(), lambda: self._ids(), metrics)
        self._sleep = sleep

    # ------------------------------------------------------------ synchronous part

    def archive(self, session: Session, *, pr_status: PrStatus | None = None) -> Session:
        """Refresh git/PR state (never blocking), then mark archived in one transaction with
        the archived count; ``Session Archived`` starts the finalisation."""
        if session.status is SessionStatus.ARCHIVED:
            return session
        git = self._refresh_git(session)
        if pr_status is not None:
            git["pr_status"] = pr_status
        number = git.get("pr_number", session.pr_number)
        git["pr_key"] = pr_key(session.repo_owner, session.repo_name, number)
        finalize = bool(session.sandbox or session.snapshot)
        changes: LifecycleFields = {
            **git,
            "lifecycle_error": None,
            "sandbox_expires_at": None,
            "hibernate_after": None,
            "turn_active_until": None,
            "lifecycle_run_id": None,
            "due_at": None,
            "due_shard": None,
            "hibernated_at": None,
            "idle_shard": None,
            "archive_pending": True if finalize else None,
        }
        entry = self._entry(
            session,
            "session.archived",
            {
                "from": str(session.lifecycle_state),
                "to": "archived",
                "finalize": finalize,
                "prStatus": str(git.get("pr_status", session.pr_status) or "") or None,
            },
        )
        updated = self._store.set_status(
            session, SessionStatus.ARCHIVED, LifecycleState.ARCHIVED, entry, changes
        )
        self._metrics.count("SessionArchived")
        return updated

    def auto_archive(self) -> AutoArchived:
        """The scheduled rule: archive every session hibernated longer than the setting's days
        (0 disables). The idle index holds exactly the hibernated sessions."""
        days = self._settings.auto_archive_days
        if days <= 0:
            return AutoArchived(stale=0, archived=0)
        stale = self._store.hibernated_before(self._clock() - timedelta(days=days))
        archived = 0
        for session_id in stale:
            session = self._store.get_session(session_id)
            if session is None or session.lifecycle_state is not LifecycleState.HIBERNATED:
                continue
            try:
                self.archive(session)
                archived += 1
            except (StaleState, Conflict) as exc:  # it moved meanwhile: the next sweep decides
                log.info("auto-archive skipped %s: %s", session_id, exc)
        self._metrics.count("SessionsAutoArchived", archived)
        return AutoArchived(stale=len(stale), archived=archived)

    def _refresh_git(self, session: Session) -> LifecycleFields:
        """Reference §5.2 step 3, on the session's own branch: the branch the sandbox is on is
        saved to show; the PR is refreshed by its number, else looked up for the own branch
        (never for one the sandbox names: pull_requests.py)."""
        updates: LifecycleFields = {}
        try:
            if session.sandbox and session.lifecycle_state in LIVE:
                seen = self._workspaces(session.sandbox).git_branch().branch
                if seen is not None and seen != session.branch:
                    updates["branch"] = seen
            updates.update(self._refreshed_pr(session))
            return updates
        except Exception as exc:  # the archive never fails because of the refresh
            log.warning("git/PR refresh before archiving %s failed: %s", session.id, exc)
            return {}

    def _refreshed_pr(self, session: Session) -> LifecycleFields:
        host = self._git_host
        if host is None or not (session.clone_url or session.repo_name):
            return {}
        if session.pr_number is not None:
            by_number = host.pull_request(session.repo, session.pr_number)
            if by_number is not None:
                changed = by_number.state is not session.pr_status
                return {"pr_status": by_number.state} if changed else {}
        if session.own_branch is None:
            return {}
        found = host.pull_request_for_branch(session.repo, session.own_branch)
        if found is None:
            has_pr = session.pr_number is not None or session.pr_status is not None
            return {"pr_number": None, "pr_status": None} if has_pr else {}
        updates: LifecycleFields = {}
        if found.number != session.pr_number:
            updates["pr_number"] = found.number
        if found.state is not session.pr_status:
            updates["pr_status"] = found.state
        return updates

    # ----------------------------------------------------------- asynchronous part

    def finalize(self, session_id: str) -> Finalized:
        """Bundle → artifact store → stop the sandbox → delete the snapshot → clear state.
        Idempotent; a failure is recorded on the session and raised (the caller retries)."""
        session = self._store.get_session(session_id)
        if session is None or session.status is not SessionStatus.ARCHIVED:
            return Finalized(finalized=False, reason="not-archived")
        if not session.archive_pending and not session.sandbox and not session.snapshot:
            return Finalized(finalized=False, reason="nothing-to-do")
        try:
            session = self._save(session)
        except Exception as exc:
            message = f"{ERROR_PREFIX}{exc}"[:1000]
            log.warning("archive finalisation of %s failed: %s", session_id, exc)
            with contextlib.suppress(StaleState):
                self._move(
                    session,
                    Change.failed(Failure.ARCHIVE_FAILED),
                    "session.archive_failed",
                    {"error": message, "code": Failure.ARCHIVE_FAILED.value},
                )
            self._metrics.count("ArchiveFinalizeFailed")
            raise ArchiveFailed(message) from exc
        if session.sandbox is not None:
            self._stop(session.sandbox)
        if session.snapshot:
            try:
                self._driver.delete_snapshot(session.snapshot)
            except SandboxError as exc:  # an orphan costs storage, never data
                log.warning("could not delete the snapshot of %s: %s", session_id, exc)
        done = self._move(
            session,
            Change(
                sandbox=None,
                snapshot=None,
                archive_pending=None,
                lifecycle_error=None,
                sandbox_expires_at=None,
                hibernate_after=None,
            ),
            "session.archive_finalized",
            {"bundle": _key(session.bundle)},
        )
        self._metrics.count("ArchiveFinalized")
        return Finalized(finalized=True, bundle=_key(done.bundle))

    def _save(self, session: Session) -> Session:
        """Store the bundle (from the running sandbox, or from a temporary sandbox restored
        from the snapshot) and record it on the session. Skipped when already stored."""
        if session.bundle and session.bundle.generation == session.sandbox_generation:
            return session  # stored by an earlier attempt that failed later
        if session.sandbox is not None and not self._running(session.sandbox):
            if session.snapshot is None:
                raise SandboxError("the sandbox stopped before its work could be bundled")
            session = session.model_copy(update={"sandbox": None})
        if session.sandbox is None and session.snapshot is None:
            return session
        if session.sandbox is None:
            session = self._temporary_sandbox(session)
        handle = session.sandbox
        if handle is None:  # the temporary sandbox's transition always records it
            raise SandboxError("no sandbox to bundle the workspace from")
        saved = self._bundle(handle, session)
        if saved is None:  # a session without a repository keeps only its chats
            return session
        data, place, remote = saved
        key = bundle_key(session.id, handle.generation)
        self._artifacts.put(key, data)
        ref = BundleRef(
            key=key,
            generation=handle.generation,
            sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            branch=place.branch,
            head=place.head,
            upstream=remote.upstream,
            origin_head=remote.origin_head,
            created_at=self._clock(),
        )
        previous = session.bundle
        session = self._transitions.move(session, ARCHIVED, Change(bundle=ref))
        if previous and previous.key != key:
            self._artifacts.delete(previous.key)
        return session

    def _bundle(
        self, handle: SandboxHandle, session: Session
    ) -> tuple[bytes, GitPlace, GitRemote] | None:
        """The bundle of a sandbox whose commands were killed first (the archive stops it
        anyway), so that a fork bomb or a runaway command cannot wedge it; a failed bundle is
        tried once more, after another kill."""
        _kill_commands(self._driver, handle)
        try:
            return save_bundle(self._workspaces(handle), session)
        except SandboxError as exc:
            log.warning(
                "bundle of %s failed (%s): killing its commands, once more", session.id, exc
            )
            _kill_commands(self._driver, handle)
            return save_bundle(self._workspaces(handle), session)

    def _temporary_sandbox(self, session: Session) -> Session:
        """A hibernated session's workspace lives only in its snapshot: restore it into a
        temporary sandbox generation to produce the bundle (stopped by ``finalize``)."""
        if session.snapshot is None:
            return session
        # Its own generation: the next number may belong to a start that was kicked (a resume
        # or retry that lost to this archive) but has not claimed it yet. Skipping it, no such
        # stale run can match the archiver's sandbox — nor, after an unarchive, fail the session
        # with its generation-conditional writes.
        generation = session.sandbox_generation + ARCHIVER_GENERATION_STEP
        self._store.claim_generation(session.id, generation)
        handle = self._driver.start(session.id, generation, from_snapshot=session.snapshot)
        session = self._transitions.move(
            session, ARCHIVED, Change(sandbox=handle), generation=generation
        )
        for _ in range(self._settings.sandbox_ready_attempts):
            probe = self._driver.probe(handle)
            if probe.state is SandboxState.RUNNING:
                if probe.endpoint and probe.endpoint != handle.endpoint:
                    handle = handle.model_copy(update={"endpoint": probe.endpoint})
                    session = self._transitions.move(session, ARCHIVED, Change(sandbox=handle))
                return session
            if probe.state in (SandboxState.STOPPED, SandboxState.GONE):
                raise SandboxError(f"the temporary sandbox stopped: {probe.reason}")
            self._sleep(1)
        raise SandboxError("the temporary sandbox did not become ready")

    def _running(self, sandbox: SandboxHandle) -> bool:
        probe = self._driver.probe(sandbox)
        return probe.state not in (SandboxState.STOPPED, SandboxState.GONE)

    def _stop(self, handle: SandboxHandle) -> None:
        try:
            self._driver.stop(handle)
        except SandboxError as exc:
            log.warning("could not stop the archived sandbox: %s", exc)

    # ------------------------------------------------------------------ unarchive

    def unarchive(self, session: Session) -> Session | None:
        """Back to running: ``active`` when its sandbox still runs (nothing was saved yet),
        else a start (``provisioning``: the next sandbox from the bundle; ``restoring``: from
        the snapshot), which the unarchive flow kicks. None when it is not archived."""
        if session.status is not SessionStatus.ARCHIVED:
            return None
        if session.archive_pending and not session.lifecycle_error:
            raise Conflict(
                "The sandbox is still being archived for this session. Please try unarchiving "
                "again in a few seconds."
            )
        restoring = session.bundle is None and session.snapshot is not None
        state = LifecycleState.RESTORING if restoring else LifecycleState.PROVISIONING
        if session.sandbox is not None and (session.bundle or session.snapshot):
            self._stop(session.sandbox)  # a failed finalisation's
        changes: LifecycleFields = {
            "lifecycle_error": None,
            "archive_pending": None,
            "sandbox": None,
        }
        if session.sandbox is not None and not (session.bundle or session.snapshot):
            # nothing was saved yet: the sandbox that is still running is the only copy
            state = LifecycleState.ACTIVE
            changes.pop("sandbox")
            now = self._clock()
            changes["last_activity_at"] = now
            changes["hibernate_after"] = now + timedelta(
                seconds=self._settings.idle_timeout_seconds
            )
            changes["sandbox_expires_at"] = now + timedelta(
                seconds=self._settings.max_lifetime_seconds
            )
            changes = with_due(session.model_copy(update={"lifecycle_state": state}), changes)
        else:  # a start: in the overdue index, so the reconciler re-kicks it if it is lost
            unarchived = session.model_copy(update={"status": SessionStatus.RUNNING})
            changes["lifecycle_state"] = state
            changes = with_due(unarchived, changes)
        for preview in self._store.public_previews(session.id):  # archiving ended them: for good
            self._store.revoke_preview(session.id, preview.port)
        entry = self._entry(
            session,
            "session.unarchived",
            {"from": "archived", "to": str(state), "fromBundle": _key(session.bundle)},
        )
        updated = self._store.set_status(session, SessionStatus.RUNNING, state, entry, changes)
        self._metrics.count("SessionUnarchived")
        return updated

    def restore_workspace(self, session: Session, handle: SandboxHandle) -> str:
        """The workspace of a session that has an archive bundle (provisioning's ``prepare``
        answered ``FromBundle``): the bundle restored into the new sandbox; its branch."""
        client = self._workspaces(handle)
        ref = session.bundle
        if ref is None:
            raise SandboxError("the session has no archive bundle")
        data = self._artifacts.get(ref.key)
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise SandboxError("the stored bundle does not match its sha256")
        return restore_bundle(client, session, ref, data)

    # -------------------------------------------------------------------- helpers

    def _move(
        self, session: Session, changes: Change, kind: str, detail: dict[str, Any]
    ) -> Session:
        """An archived session's move: its entry names the generation."""
        entry = Entry(kind, {"generation": session.sandbox_generation, **detail})
        return self._transitions.move(session, ARCHIVED, changes, entry)

    def _entry(self, session: Session, kind: str, detail: dict[str, Any]) -> AuditEntry:
        detail = {"generation": session.sandbox_generation, **detail}
        return self._transitions.entry(session.id, kind, detail)


def _kill_commands(driver: SandboxDriver, handle: SandboxHandle) -> None:
    """Kill a sandbox's commands (sandboxd kept) before its bundle; a failure is logged, never
    raised: the bundle that follows says whether the sandbox answers."""
    try:
        killed = driver.kill_commands(handle)
    except SandboxError as exc:
        log.warning("could not kill the commands of %s: %s", handle.session_id, exc)
        return
    if killed:
        log.info("killed %d processes of %s before its bundle", killed, handle.session_id)
