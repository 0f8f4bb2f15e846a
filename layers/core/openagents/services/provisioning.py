"""Provisioning: the steps of the provisioning workflow, and the kick that starts it.

It calls no other service: the workflow's prepare and activate steps run through the
sandbox-ready flow (``services/flows/sandbox_ready.py``), which restores an archived bundle
(``FromBundle``) and hands the active sandbox to the lifecycle loop.

Each step is idempotent: Step Functions may retry any of them. A sandbox generation is claimed
with a conditional write before a sandbox starts, so a retried start never starts a second one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from openagents.domain.errors import Conflict, NotFound
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import Failure
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.git import ClonedRepository, GitHost, GitHostError, ServesClones
from openagents.git.roots import LocalRepoRefused, LocalRepoRoots, local_repo_roots
from openagents.sandbox.errors import CAPACITY
from openagents.sandbox.git_answers import GitPlace, GitRemote
from openagents.sandbox.port import (
    SandboxdClients,
    SandboxDriver,
    SandboxError,
    SandboxHandle,
    SandboxState,
)
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.archive import git_identity
from openagents.services.sessions import owned
from openagents.services.transitions import Change, Entry, Transitions
from openagents.settings import Settings
from openagents.store.port import Gone, StaleState, Store
from openagents.workflows import TaskError, Workflows

log = logging.getLogger(__name__)
PROVISIONING = frozenset({LifecycleState.PROVISIONING, LifecycleState.RESTORING})
MACHINE = "provisioning"


# What the user reads while the start waits for AWS (the session stays ``provisioning``).
WAITING_FOR_CAPACITY = (
    "Waiting for capacity: AWS has no room for another sandbox right now (this account's "
    "Fargate limit or launch rate); it starts as soon as there is"
)


class SandboxNotReady(Exception):
    """The sandbox did not become healthy within the allowed probes."""


class WaitingForCapacity(Exception):
    """The start was refused for want of capacity (``sandbox.errors.CAPACITY``). The workflow
    retries the start step on this error name (``provisioning.asl.json``), with backoff and
    jitter, until its attempts run out; the session says it is waiting meanwhile."""


@dataclass(frozen=True)
class Kick:
    started: bool
    generation: int


@dataclass(frozen=True)
class Started:
    """The start step: a sandbox of the generation is starting (``retry``: a retried start
    found it already started); not ``started`` when the session moved on (``reason``)."""

    started: bool
    retry: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class Probed:
    ready: bool
    attempts: int


@dataclass(frozen=True)
class Prepared:
    """The workspace is ready on ``branch`` (None: no repository, or a detached HEAD)."""

    branch: str | None
    from_bundle: bool = False


@dataclass(frozen=True)
class FromBundle:
    """The prepare step's answer for an unarchived session (it has an archive bundle): its
    workspace comes from that bundle, restored into ``handle`` by the archive's
    ``restore_workspace`` (the sandbox-ready flow's step)."""

    session: Session
    handle: SandboxHandle


@dataclass(frozen=True)
class Settled:
    """Where the activate and fail steps left the session: a lifecycle state, or ``gone``;
    activate's ``session`` is the active session, for the sandbox-ready flow's next steps."""

    state: str
    session: Session | None = None


def execution_name(session_id: str, generation: int) -> str:
    return f"provision-{session_id}-g{generation}"


def readable_error(error: TaskError | None) -> str:
    """Step Functions' ``{Error, Cause}`` (Cause: a Lambda error as JSON) → one line."""
    if error is None or not (error.error or error.cause):
        return "Provisioning failed"
    cause = error.cause or ""
    try:
        message = json.loads(cause).get("errorMessage") or cause
    except (ValueError, AttributeError):
        message = cause
    name = error.error or "Error"
    return f"Provisioning failed: {name}: {message}".strip()[:1000]


class ProvisioningService:
    def __init__(
        self,
        store: Store,
        driver: SandboxDriver,
        workflows: Workflows,
        workspaces: SandboxdClients,
        settings: Settings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        clone: Callable[[Session], ClonedRepository | None] | None = None,
    ) -> None:
        self._clone = clone  # a private repository, fetched by the git host with its token
        self._local_roots = local_repo_roots(settings.local_repo_roots, settings.home)
        self._store = store
        self._driver = driver
        self._workflows = workflows
        self._workspaces = workspaces
        self._settings = settings
        self._clock = clock
        self._ids = ids
        self._metrics = metrics
        # clock and ids read through the service: a test that sets them sets the moves' too
        self._transitions = Transitions(store, lambda: self._clock(), lambda: self._ids(), metrics)

    # ------------------------------------------------------------------ kick

    def kick(self, session: Session, generation: int | None = None) -> Kick:
        """Start the provisioning workflow for a sandbox generation (default: the claimed one,
        or the first); a ``restoring`` session restores its snapshot. The execution name makes
        a repeated kick a no-op."""
        generation = generation or max(session.sandbox_generation, 1)
        payload = {
            "sessionId": session.id,
            "generation": generation,
            "restore": session.lifecycle_state is LifecycleState.RESTORING,
            "probe": {"ready": False, "attempts": 0},
        }
        started = self._workflows.start(MACHINE, execution_name(session.id, generation), payload)
        return Kick(started=started, generation=generation)

    def ensure(self, identity: Identity, session_id: str) -> tuple[Session, Kick | None]:
        """``POST /api/sandbox``: re-kick a provisioning session, retry a failed one with a new
        sandbox generation; leave a running or hibernated sandbox alone."""
        session = owned(self._store.get_session(session_id), identity)
        if session.status is SessionStatus.ARCHIVED:
            raise Conflict("Session is archived; unarchive it first", field="sessionId")
        if session.lifecycle_state is LifecycleState.FAILED:
            session = self._transitions.move(
                session,
                frozenset({LifecycleState.FAILED}),
                Change(lifecycle_state=LifecycleState.PROVISIONING, lifecycle_error=None),
                Entry("sandbox.retry", {}),
            )
            return session, self.kick(session, session.sandbox_generation + 1)
        if session.lifecycle_state in PROVISIONING:
            return session, self.kick(session)
        return session, None

    # ------------------------------------------------------------------ steps

    def start(self, session_id: str, generation: int) -> Started:
        session = self._session(session_id)
        if session.lifecycle_state not in PROVISIONING:
            return Started(started=False, reason=f"session is {session.lifecycle_state}")
        claimed = self._store.claim_generation(session_id, generation)
        if not claimed and session.sandbox and session.sandbox.generation == generation:
            return Started(started=True, retry=True)
        restoring = session.lifecycle_state is LifecycleState.RESTORING
        try:
            handle = self._driver.start(
                session_id,
                generation,
                from_snapshot=session.snapshot if restoring else None,
                shared_paths=_local_repo_paths(session, self._local_roots),
            )
        except SandboxError as exc:
            if exc.code != CAPACITY:
                raise
            return self._wait_for_capacity(session, generation, str(exc))
        try:
            self._transitions.move(
                session,
                PROVISIONING,
                Change(sandbox=handle, lifecycle_error=None),
                Entry("sandbox.starting", {"generation": generation}),
                generation=generation,
            )
        except StaleState:
            self._driver.stop(handle)  # the session moved on (archived, deleted, newer run)
            raise
        return Started(started=True)

    def _wait_for_capacity(self, session: Session, generation: int, reason: str) -> Started:
        """Tell the user the start waits (once: a retried refusal writes nothing), then raise
        for the workflow to retry. The refused RunTask started nothing, and its retry carries
        the same client token: a start that did land is found, never doubled."""
        self._metrics.count("SandboxCapacityWait")
        if session.lifecycle_error != WAITING_FOR_CAPACITY:
            try:
                self._transitions.move(
                    session,
                    PROVISIONING,
                    Change(lifecycle_error=WAITING_FOR_CAPACITY),
                    Entry("sandbox.waiting", {"generation": generation, "reason": reason[:500]}),
                    generation=generation,
                )
            except StaleState:  # the session moved on while AWS said no: nothing to wait for
                return Started(started=False, reason="session moved on")
        raise WaitingForCapacity(reason)

    def probe(self, session_id: str, generation: int, attempts: int) -> Probed:
        session = self._session(session_id)
        handle = self._handle(session, generation)
        probe = self._driver.probe(handle)
        if probe.state in (SandboxState.STOPPED, SandboxState.GONE):
            raise SandboxError(f"sandbox {probe.state}: {probe.reason or 'no reason given'}")
        if probe.endpoint and probe.endpoint != handle.endpoint:
            found = handle.model_copy(update={"endpoint": probe.endpoint})
            self._transitions.move(
                session, PROVISIONING, Change(sandbox=found), generation=generation
            )
        ready = probe.state is SandboxState.RUNNING
        if not ready and attempts + 1 >= self._settings.sandbox_ready_attempts:
            raise SandboxNotReady(f"sandbox not ready after {attempts + 1} checks: {probe.reason}")
        return Probed(ready=ready, attempts=attempts + 1)

    def prepare(self, session_id: str, generation: int) -> Prepared | FromBundle:
        """The workspace: a restore verified, a clone, or a new repository; an unarchived
        session's comes from its archive bundle (``FromBundle``: the flow restores it)."""
        session = self._session(session_id)
        handle = self._handle(session, generation)
        if session.lifecycle_state is LifecycleState.RESTORING:
            return self._verify_restore(session, handle)
        if session.bundle:  # unarchived: the archive's bundle
            return FromBundle(session, handle)
        if not session.clone_url:  # no repository: a new one (bundled and diffed like any)
            self._workspaces(handle).prepare_workspace(
                clone_url="",
                branch=session.checkout_branch,
                is_new_branch=False,
                git_name=session.owner_name or session.user_id,
                git_email=session.owner_email
                or f"{session.user_id}@users.noreply.openagents.local",
            )
            return Prepared(branch=None)
        cloned = self._clone(session) if self._clone is not None else None
        if cloned is not None:  # a private repository: handed over as data, never a token
            return Prepared(branch=self._restore_clone(session, handle, cloned))
        result = self._workspaces(handle).prepare_workspace(
            clone_url=session.clone_url,
            branch=session.checkout_branch,
            is_new_branch=session.is_new_branch,
            git_name=session.owner_name or session.user_id,
            git_email=session.owner_email or f"{session.user_id}@users.noreply.openagents.local",
        )
        return Prepared(branch=result.branch)

    def _restore_clone(
        self, session: Session, handle: SandboxHandle, cloned: ClonedRepository
    ) -> str | None:
        """The control plane's clone into the sandbox: the bundle restored with origin at the
        plain URL (no credentials), origin's default branch and the branch's upstream set, so
        ``git status`` and ``GET /git/remote`` answer as after a clone."""
        git_name, git_email = git_identity(session)
        client = self._workspaces(handle)
        try:
            restored = client.git_bundle_restore(
                cloned.bundle,
                place=GitPlace(branch=cloned.branch, head=cloned.head),
                remote=GitRemote(
                    default_branch=cloned.default_branch,
                    origin_head=f"refs/remotes/origin/{cloned.default_branch}",
                    upstream=cloned.upstream,
                ),
                clone_url=session.clone_url,
                git_name=git_name,
                git_email=git_email,
            )
        except SandboxError as exc:
            if exc.code != "workspace_not_empty":
                raise
            # a retried step: the first restore landed, the workspace holds the branch
            if client.git_branch().branch != cloned.branch:
                raise
            return cloned.branch
        return restored.branch

    def _verify_restore(self, session: Session, handle: SandboxHandle) -> Prepared:
        """The restored workspace is the snapshot's: git HEAD as the manifest recorded it (a
        workspace that was no git repository has no HEAD to compare)."""
        expected = session.snapshot.manifest.get("gitHead") if session.snapshot else None
        if not expected:
            return Prepared(branch=None)
        place = self._workspaces(handle).git_branch()
        if place.head != expected:
            raise SandboxError(f"restore verification failed: git HEAD {place.head} != {expected}")
        return Prepared(branch=place.branch)

    def activate(self, session_id: str, generation: int) -> Settled:
        """The sandbox active (its idle and lifetime timers set); the sandbox-ready flow then
        hands it to the wait-then-hibernate loop."""
        now = self._clock()
        settings = self._settings
        before = self._session(session_id)
        changes = Change(
            lifecycle_state=LifecycleState.ACTIVE,
            lifecycle_error=None,
            last_activity_at=now,
            hibernate_after=now + timedelta(seconds=settings.idle_timeout_seconds),
            sandbox_expires_at=now + timedelta(seconds=settings.max_lifetime_seconds),
            turn_active_until=None,
        )
        kind = (
            "sandbox.resumed"
            if before.lifecycle_state is LifecycleState.RESTORING
            else "sandbox.active"
        )
        session = self._transitions.move(
            before,
            PROVISIONING,
            changes,
            Entry(
                kind,
                {"generation": generation, "from": str(before.lifecycle_state), "to": "active"},
            ),
            generation=generation,
            bump=True,
            metric="SandboxResumed" if kind == "sandbox.resumed" else "SandboxActive",
        )
        return Settled(state=str(session.lifecycle_state), session=session)

    def fail(self, session_id: str, generation: int, error: TaskError | None) -> Settled:
        message = readable_error(error)
        try:
            session = self._session(session_id)
        except Gone:
            return Settled(state="gone")
        handle = session.sandbox
        if handle is not None and handle.generation == generation:
            try:
                self._driver.stop(handle)
            except SandboxError as exc:  # stopping is best effort; the error is recorded
                log.warning("could not stop the half-started sandbox: %s", exc)
        restoring = session.lifecycle_state is LifecycleState.RESTORING
        # A failed restore keeps the snapshot: the session goes back to hibernated.
        target = LifecycleState.HIBERNATED if restoring else LifecycleState.FAILED
        code = Failure.RESTORE_FAILED if restoring else Failure.PROVISIONING_FAILED
        try:
            self._transitions.move(
                session,
                PROVISIONING,
                Change(lifecycle_state=target, sandbox=None)
                | Change.failed(code)
                | Change(hibernated_at=self._clock() if restoring else None),
                Entry("sandbox.failed", {"error": message, "code": code.value, "to": str(target)}),
                generation=generation,
                metric="SandboxFailed",
            )
        except StaleState:
            return Settled(state=str(session.lifecycle_state))
        return Settled(state=target.value)

    # ---------------------------------------------------------------- helpers

    def _session(self, session_id: str) -> Session:
        session = self._store.get_session(session_id)
        if session is None:
            raise Gone(f"session {session_id} not found")
        return session

    @staticmethod
    def _handle(session: Session, generation: int) -> SandboxHandle:
        if session.sandbox is None or session.sandbox.generation != generation:
            raise NotFound(f"no sandbox of generation {generation}")
        return session.sandbox


def _local_repo_paths(session: Session, roots: LocalRepoRoots) -> tuple[str, ...]:
    """A local repository the sandbox reads (bound read-only: the sandbox clones from it and
    pushes back only through the git host); checked against the allowed roots again, and
    refused when its real path is no longer the one saved at create (a symlink since)."""
    url = session.clone_url or ""
    if not url.startswith("file://"):
        return ()
    saved = url.removeprefix("file://")
    try:
        real = roots.resolve(url)
    except LocalRepoRefused as exc:
        raise SandboxError(f"local repository refused: {exc}") from None
    if str(real) != saved:
        raise SandboxError(f"local repository refused: {saved} now resolves to {real}")
    return (str(real),)


def private_clone(git_host: GitHost | None, session: Session) -> ClonedRepository | None:
    """A private repository fetched by the git host with its token, as a bundle for the
    sandbox (the token never enters it); None when the host has no token for it (public or
    local repositories: the sandbox clones them anonymously)."""
    if not isinstance(git_host, ServesClones) or not session.repo_owner or not session.repo_name:
        return None
    repo = session.repo
    try:
        token = git_host.clone_token(repo)
    except GitHostError as exc:  # a public repository still clones without one
        log.warning("no clone token for %s/%s: %s", repo.owner, repo.name, exc)
        return None
    if token is None:
        return None
    try:
        return git_host.clone(
            repo, branch=session.checkout_branch, is_new_branch=session.is_new_branch
        )
    except GitHostError as exc:  # the token was there: the clone failed, and says why
        raise SandboxError(f"clone failed: {exc.message}") from None
