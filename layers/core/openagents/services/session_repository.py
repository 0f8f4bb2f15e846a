"""A session started without a repository gains one (issue 25, ``POST
/api/sessions/{id}/repository``): an existing repository the git host takes pushes for (a local
repository under the allowed roots on one machine, a GitHub repository on AWS) or a new GitHub
repository made for it. The session's work is pushed to its own branch there, then the session
records the repository.

The branch is the control plane's word, never the sandbox's: the one given, else the session's
own branch from create, else ``<initials>/<8 hex>`` derived from the session's id (so a retry
names the same branch). The sandbox is switched onto that branch and its ``origin`` set to the
plain URL (no credentials) by commands the control plane writes; what the sandbox answers only
gates the push, as for every push (``AutoCommitService.push``: a bundle the git host writes).

Nothing is half-written: the repository is recorded (with its audit entry and event, one
conditional write: only while the session has none) after the push landed, so a session never
claims a repository it could not push to. A failed push changes nothing the session shows and
the same call again is safe (same branch, same bundle); a repository created for it stays, and
the error names its URL to retry with."""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass
from typing import Any

from openagents.domain import naming, validation
from openagents.domain.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    SandboxNotRunning,
    SessionArchived,
)
from openagents.domain.identity import Identity
from openagents.domain.models import AuditEntry, Repo, Session, SessionStatus
from openagents.git import GitHost, GitHostError, ReceivesPushes
from openagents.git.catalog import CreatesRepositories, RepositoryExists
from openagents.git.roots import LocalRepoRefused, LocalRepoRoots
from openagents.sandbox.port import Sandboxd, SandboxdClients, SandboxError
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.auto_commit import AutoCommitService
from openagents.services.git_actions import (
    GitHostFailed,
    NoGitHost,
    PushFailed,
    PushRefused,
    host_error,
    no_turn,
)
from openagents.services.git_cards import Card, CardValue, GitCards
from openagents.services.sandbox_tools import public_detail, sandbox_of
from openagents.services.sessions import owned
from openagents.store.port import Gone, RepositoryAlreadySet, Store

log = logging.getLogger(__name__)
REPO_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
LOCAL_CREATE = (
    "Creating repositories needs GitHub; on one machine, create a folder under "
    "OPENAGENTS_LOCAL_REPO_ROOTS, run git init, and give its path as repoUrl"
)
PREPARE_TIMEOUT = 60


class RepositoryAlreadyAttached(Conflict):
    code = "repository_already_set"


@dataclass(frozen=True)
class NewRepository:
    """``create``: a new GitHub repository for the session."""

    name: str
    private: bool = True


@dataclass(frozen=True)
class RepositorySettings:
    allowed_hosts: tuple[str, ...]
    local_allowed: bool
    host_setting: str


class SessionRepositories:
    def __init__(
        self,
        store: Store,
        clients: SandboxdClients,
        git_host: GitHost | None,
        auto_commit: AutoCommitService,
        cards: GitCards,
        roots: LocalRepoRoots,
        settings: RepositorySettings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
    ) -> None:
        self._store, self._clients, self._git_host = store, clients, git_host
        self._auto_commit, self._cards, self._roots = auto_commit, cards, roots
        self._settings = settings
        self._clock, self._ids, self._metrics = clock, ids, metrics

    def attach(
        self,
        identity: Identity,
        session_id: str,
        *,
        repo_url: str | None,
        branch: str | None,
        create: NewRepository | None,
    ) -> Session:
        session = owned(self._store.get_session(session_id), identity)
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        if _has_repository(session):
            raise RepositoryAlreadyAttached(
                "The session has a repository already", field="sessionId"
            )
        if (repo_url is None) == (create is None):
            raise InvalidInput("Give repoUrl or create (one of them)", field="repoUrl")
        own, made_here = self._branch(identity, session, branch)
        host = self._pushing_host(create)
        repo = self._existing(host, repo_url) if repo_url is not None else None
        client = self._live(session)
        created = False
        if repo is None:
            assert create is not None
            repo = self._create(host, create)
            created = True
        candidate = session.model_copy(
            update={
                "repo_owner": repo.owner,
                "repo_name": repo.name,
                "clone_url": repo.clone_url,
                "own_branch": own,
                "branch": own,
                "is_new_branch": made_here,
            }
        )
        commit = self._push(candidate, client, own, repo, created)
        detail: dict[str, Any] = {
            "repoUrl": repo.clone_url,
            "repoOwner": repo.owner,
            "repoName": repo.name,
            "branch": own,
            "commit": commit,
            "created": created,
        }
        entry = AuditEntry(
            id=self._ids(),
            session_id=session.id,
            at=self._clock(),
            type="session.repository_attached",
            detail={key: value for key, value in detail.items() if value is not None},
        )
        try:
            updated = self._store.set_repository(session, repo, own, made_here, entry)
        except RepositoryAlreadySet:  # a concurrent call recorded one first
            raise RepositoryAlreadyAttached(
                "The session has a repository already", field="sessionId"
            ) from None
        except Gone:
            raise NotFound("Session not found") from None
        self._metrics.count("SessionRepositoryAttached")
        card: dict[str, CardValue] = {
            "branch": own,
            "commit": commit,
            "pushed": True,
            "reason": None,
        }
        self._cards.record(updated, Card("push", card, "button"))
        return updated

    # ------------------------------------------------------------------ steps

    @staticmethod
    def _branch(identity: Identity, session: Session, given: str | None) -> tuple[str, bool]:
        """The branch the session will push, and whether the session made it (a force push
        is allowed only on such a branch)."""
        if given is not None:
            return validation.branch(given.strip(), field="branch"), False
        if session.own_branch:
            return session.own_branch, session.is_new_branch
        named = naming.branch_name(identity.username, identity.name, key=session.id)
        try:
            return validation.branch(named), True
        except InvalidInput:  # initials git would refuse: the neutral ones
            return naming.branch_name(None, None, key=session.id), True

    def _pushing_host(self, create: NewRepository | None) -> GitHost:
        host = self._git_host
        if create is not None and not isinstance(host, CreatesRepositories):
            raise NoGitHost(
                LOCAL_CREATE
                if self._settings.local_allowed
                else f"No git host creates repositories: set {self._settings.host_setting}",
                field="create",
            )
        if not isinstance(host, ReceivesPushes) or host is None:
            raise NoGitHost(
                f"No git host takes pushes: set {self._settings.host_setting}", field=None
            )
        return host

    def _existing(self, host: GitHost, repo_url: str) -> Repo:
        repo = validation.repository(
            url=repo_url,
            owner=None,
            name=None,
            field="repoUrl",
            allowed_hosts=self._settings.allowed_hosts,
            allow_local=self._settings.local_allowed,
        )
        if repo is None:  # pragma: no cover - a url always resolves or raises
            raise InvalidInput("repoUrl is required", field="repoUrl")
        if (repo.clone_url or "").startswith("file://"):
            try:
                real = self._roots.repository(repo.clone_url or "")
            except LocalRepoRefused as exc:
                raise InvalidInput(str(exc), field="repoUrl") from None
            repo = repo.model_copy(update={"clone_url": f"file://{real}"})
        if not isinstance(host, ReceivesPushes) or not host.receives(repo):
            raise NoGitHost(
                f"No git host takes pushes to this repository: set {self._settings.host_setting}",
                field="repoUrl",
            )
        try:
            default = host.default_branch(repo)
        except GitHostError as exc:
            if exc.status in (403, 404):
                raise NotFound("Repository not found", field="repoUrl") from None
            raise host_error(exc, "reading the repository") from None
        if default is None:
            raise NotFound("Repository not found", field="repoUrl")
        return repo

    def _live(self, session: Session) -> Sandboxd:
        _, client = sandbox_of(session, self._clients)
        no_turn(session)
        return client

    def _create(self, host: GitHost, create: NewRepository) -> Repo:
        if not isinstance(host, CreatesRepositories):  # pragma: no cover - _pushing_host
            raise NoGitHost(LOCAL_CREATE, field="create")
        name = create.name
        if not REPO_NAME.match(name) or name in (".", ".."):
            raise InvalidInput(
                "name must be 1-100 letters, digits, '.', '-' or '_'", field="create.name"
            )
        try:
            info = host.create_repository(name, private=create.private)
        except RepositoryExists as exc:
            raise Conflict(str(exc), field="create.name") from None
        except GitHostError as exc:
            if exc.status == 400:
                raise NoGitHost(exc.message, field="create") from None
            raise host_error(exc, "creating the repository") from None
        repo = validation.repository(
            url=None,
            owner=info.owner,
            name=info.name,
            field="create.name",
            allowed_hosts=self._settings.allowed_hosts,
            allow_local=False,
        )
        if repo is None:  # pragma: no cover - owner and name are given
            raise GitHostFailed("The git host created a repository without an owner")
        return repo

    def _push(self, session: Session, client: Sandboxd, own: str, repo: Repo, created: bool) -> str:
        """The sandbox on ``own`` with origin at the plain URL, then the branch pushed through
        the git host. The commit that landed; nothing recorded when it did not."""
        retry = f" (the repository {repo.clone_url} was created: retry with it as repoUrl)"
        suffix = retry if created else ""
        url = repo.clone_url or ""
        command = (
            f"git switch --quiet -C {shlex.quote(own)} && "
            "{ git remote remove origin >/dev/null 2>&1 || true; } && "
            f"git remote add origin {shlex.quote(url)}"
        )
        try:
            done = client.exec(command, timeout_seconds=PREPARE_TIMEOUT, max_output_bytes=64 << 10)
        except SandboxError as exc:
            raise SandboxNotRunning("The sandbox is unavailable. Please resume it.") from exc
        if done.exit_code != 0:
            tail = public_detail(done.stderr or done.stdout)[-300:]
            raise PushRefused(
                f"git could not switch the sandbox to {own}: {tail.strip()}{suffix}",
                field="sessionId",
            )
        try:
            result = self._auto_commit.push(session, client)
        except SandboxError:
            raise SandboxNotRunning("The sandbox is unavailable. Please resume it.") from None
        if result.no_host:
            raise NoGitHost(
                f"No git host takes pushes: set {self._settings.host_setting}", field=None
            )
        if result.refused is not None:
            raise PushRefused(f"Cannot push: {result.refused}{suffix}", field="sessionId")
        if result.failed is not None or result.commit is None:
            raise PushFailed(
                f"The git host refused the push: {result.failed or 'no commit'}{suffix}"
            )
        return result.commit


def _has_repository(session: Session) -> bool:
    return bool(session.clone_url or session.repo_owner or session.repo_name)
