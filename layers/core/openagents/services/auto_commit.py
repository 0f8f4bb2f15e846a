"""Auto-commit and auto-PR when an agent ends a turn (reference §4.9, issue "Archive").

Commit everything with a conventional message, push the branch with a short-lived token that
reaches git only through an askpass helper outside the workspace, and — when auto-PR is on —
create the pull request or sync the open one. Skips are recorded with their reason. Every
outcome is an audit entry (and so an event); nothing here ever fails the agent's call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from openagents.domain.lifecycle import LOOPED_STATES
from openagents.domain.models import AuditEntry, PrStatus, Repo, Session, pr_key
from openagents.git import GitHost, GitHostError
from openagents.sandbox.port import SandboxError, SandboxExec, SandboxHandle
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.archive import git_identity
from openagents.services.journal import Journal
from openagents.store.port import StaleState, Store

log = logging.getLogger(__name__)
PUSH_TIMEOUT_SECONDS = 20  # the agent's call stays inside API Gateway's 29 s
COMMIT = r"""
set -euo pipefail
git add -A
git -c user.name="$OA_NAME" -c user.email="$OA_EMAIL" commit -q -m "$OA_MESSAGE"
git rev-parse HEAD
"""
# The token lives only in this process's environment; the helper that hands it to git is a
# private temporary file outside the workspace, removed right after the push.
PUSH = r"""
set -uo pipefail
helper=$(mktemp)
trap 'rm -f "$helper"' EXIT
chmod 700 "$helper"
printf '#!/bin/sh\ncase "$1" in Username*) echo x-access-token ;; *) echo "$OA_TOKEN" ;; esac\n' \
  > "$helper"
GIT_ASKPASS="$helper" GIT_TERMINAL_PROMPT=0 git push -q -u origin "HEAD:refs/heads/$OA_BRANCH"
"""
DEFAULT_BRANCH = "git symbolic-ref -q --short refs/remotes/origin/HEAD | sed 's|^origin/||'"


class GitClient(SandboxExec, Protocol):
    def git_status(self) -> dict[str, Any]: ...


def commit_message(status: dict[str, Any]) -> str:
    files = [f.get("path", "") for f in status.get("uncommittedFiles") or []]
    if len(files) == 1:
        return f"chore: update {files[0]}"[:72]
    return f"chore: update {len(files)} files"


class AutoCommitService:
    def __init__(
        self,
        store: Store,
        clients: Callable[[SandboxHandle], GitClient],
        git_host: GitHost | None,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        journal: Journal,
    ) -> None:
        self._store = store
        self._clients = clients
        self._git_host = git_host
        self._clock = clock
        self._ids = ids
        self._metrics = metrics
        self._journal = journal

    def after_turn(self, session: Session) -> dict[str, Any]:
        prefs = self._store.get_user(session.user_id).preferences
        auto_commit = _choose(session.auto_commit_push_override, prefs.auto_commit_push)
        auto_pr = auto_commit and _choose(session.auto_create_pr_override, prefs.auto_create_pr)
        if not auto_commit:
            return {"skipped": "auto-commit is off"}
        if session.lifecycle_state not in LOOPED_STATES or not session.sandbox:
            return self._record(session, {"skipped": "no running sandbox"})
        try:
            outcome = self._commit_and_push(
                session, self._clients(SandboxHandle.from_dict(session.sandbox))
            )
        except SandboxError as exc:
            outcome = {"skipped": f"sandbox error: {exc}"}
        if auto_pr and outcome.get("pushed"):
            outcome |= self._pull_request(session, outcome["branch"], outcome["base"])
        return self._record(session, outcome)

    def _commit_and_push(self, session: Session, client: GitClient) -> dict[str, Any]:
        status = client.git_status()
        branch = status.get("branch")
        if status.get("isDetachedHead") or not branch:
            return {"skipped": "detached HEAD"}
        base = self._default_branch(session, client)
        if branch == base:
            return {"skipped": f"{branch} is the default branch", "branch": branch}
        outcome: dict[str, Any] = {"branch": branch, "base": base, "committed": False}
        if status.get("hasUncommittedChanges"):
            env = git_identity(session) | {"OA_MESSAGE": commit_message(status)}
            done = client.exec(COMMIT, env=env)
            if done.get("exitCode") != 0:
                return outcome | {"skipped": f"commit failed: {_tail(done)}"}
            outcome |= {"committed": True, "commit": str(done.get("stdout", "")).strip()}
        elif not status.get("hasUnpushedCommits"):
            return outcome | {"pushed": False, "skipped": "nothing to commit or push"}
        env = {"OA_BRANCH": branch, "OA_TOKEN": self._token(session) or ""}
        pushed = client.exec(PUSH, env=env, timeout_seconds=PUSH_TIMEOUT_SECONDS)
        if pushed.get("exitCode") != 0:
            return outcome | {"pushed": False, "skipped": f"push failed: {_tail(pushed)}"}
        return outcome | {"pushed": True}

    def _pull_request(self, session: Session, branch: str, base: str | None) -> dict[str, Any]:
        if self._git_host is None or base is None:
            return {"pr": "skipped: no git host or default branch"}
        repo = Repo(owner=session.repo_owner, name=session.repo_name, clone_url=session.clone_url)
        try:
            pr = self._git_host.pull_request_for_branch(repo, branch)
            if pr is None or pr.state is not PrStatus.OPEN:
                title = f"{session.title}: agent changes"
                body = f"Opened by Open Agents for session {session.id} ({session.title})."
                pr = self._git_host.create_pull_request(
                    repo, head_branch=branch, base_branch=base, title=title, body=body
                )
        except GitHostError as exc:
            return {"pr": f"skipped: {exc}"}
        changes = {
            "pr_number": pr.number,
            "pr_status": PrStatus.OPEN,
            "pr_key": pr_key(session.repo_owner, session.repo_name, pr.number),
        }
        try:
            self._store.transition(session.id, expect=LOOPED_STATES, changes=changes, entry=None)
        except StaleState:
            log.info("session %s moved on; PR #%s not recorded", session.id, pr.number)
        return {"prNumber": pr.number, "prUrl": pr.url}

    def _default_branch(self, session: Session, client: GitClient) -> str | None:
        repo = Repo(owner=session.repo_owner, name=session.repo_name, clone_url=session.clone_url)
        if self._git_host is not None:
            try:
                found = self._git_host.default_branch(repo)
            except GitHostError:
                found = None
            if found:
                return found
        guessed = client.exec(DEFAULT_BRANCH)
        return str(guessed.get("stdout", "")).strip() or None

    def _token(self, session: Session) -> str | None:
        if self._git_host is None:
            return None
        repo = Repo(owner=session.repo_owner, name=session.repo_name, clone_url=session.clone_url)
        try:
            return self._git_host.clone_token(repo)
        except GitHostError as exc:
            log.warning("no push token for %s: %s", session.id, exc)
            return None

    def _record(self, session: Session, outcome: dict[str, Any]) -> dict[str, Any]:
        entry = AuditEntry(
            id=self._ids(),
            session_id=session.id,
            at=self._clock(),
            type="sandbox.auto_commit",
            detail={k: v for k, v in outcome.items() if v is not None},
        )
        self._store.append_entry(entry)
        self._journal.publish(session.user_id, entry)
        self._metrics.count("AutoCommitPushed" if outcome.get("pushed") else "AutoCommitSkipped")
        return outcome


def _choose(override: bool | None, preference: bool) -> bool:
    return override if override is not None else preference


def _tail(result: dict[str, Any]) -> str:
    return str(result.get("stderr") or result.get("stdout") or "").strip()[-300:]
