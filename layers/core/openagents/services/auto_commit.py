"""Auto-commit and auto-PR when an agent ends a turn (reference §4.9, issue "Archive").

Commit everything with a conventional message, push the branch — to a remote with a short-lived
token that reaches git only through an askpass helper outside the workspace; to a local
repository (read-only in the sandbox) as a git bundle the control plane fetches through the
local git host, hardened — and, when auto-PR is on, create the pull request or sync the open
one. Skips are recorded with their reason. Every outcome is an audit entry (and so an event);
nothing here ever fails the agent's call.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import shlex
from collections.abc import Callable
from typing import Any, Protocol

from openagents.domain.lifecycle import LOOPED_STATES
from openagents.domain.models import AuditEntry, PrStatus, Repo, Session, pr_key
from openagents.git import GitHost, GitHostError, ReceivesPushes
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
# A local repository is read-only in the sandbox: the branch goes to the control plane as a
# bundle in a private folder under the sandbox's /tmp (outside the workspace), holding only the
# commits origin lacks (all of them when OA_FULL=1 or no thin bundle can be made). Prints the
# bundle's path, sha256, size and the branch's commit.
BUNDLE = r"""
set -euo pipefail
out=$(mktemp -d)
f="$out/push.bundle"
ref="refs/heads/$OA_BRANCH"
if [ "$OA_FULL" = 1 ] || ! git bundle create -q "$f" "$ref" --not --remotes=origin 2>/dev/null
then
  git bundle create -q "$f" "$ref"
fi
printf '%s\n' "$f"
sha256sum "$f" | cut -d' ' -f1
stat -c %s "$f"
git rev-parse "$ref"
"""
# After the host took the bundle: what `git push -u` would have recorded.
PUSHED = r"""
set -euo pipefail
git update-ref "refs/remotes/origin/$OA_BRANCH" "$OA_SHA"
git config "branch.$OA_BRANCH.remote" origin
git config "branch.$OA_BRANCH.merge" "refs/heads/$OA_BRANCH"
"""
READ_CHUNK_BYTES = 6 << 20  # base64 of it stays under sandboxd's 16 MiB exec output cap
MAX_BUNDLE_BYTES = 512 << 20
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
            outcome = self._commit_and_push(session, self._clients(session.sandbox))
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
        repo = Repo(owner=session.repo_owner, name=session.repo_name, clone_url=session.clone_url)
        if _is_local(session.clone_url):
            failure = self._push_bundle(session, client, repo, branch)
            if failure is not None:
                return outcome | {"pushed": False, "skipped": f"push failed: {failure}"}
            return outcome | {"pushed": True}
        env = {"OA_BRANCH": branch, "OA_TOKEN": self._token(session) or ""}
        pushed = client.exec(PUSH, env=env, timeout_seconds=PUSH_TIMEOUT_SECONDS)
        if pushed.get("exitCode") != 0:
            return outcome | {"pushed": False, "skipped": f"push failed: {_tail(pushed)}"}
        return outcome | {"pushed": True}

    def _push_bundle(
        self, session: Session, client: GitClient, repo: Repo, branch: str
    ) -> str | None:
        """Push to a local repository through the git host: a thin bundle first, the whole
        branch when the repository lacks the thin one's prerequisites. None: pushed."""
        host = self._git_host
        if not isinstance(host, ReceivesPushes) or not host.receives(repo):
            return "no local git host takes pushes to this repository"
        # force only on the branch the session made for itself; never on a shared one
        force = session.is_new_branch and branch == session.branch
        for full in (False, True):
            try:
                data, sha = _read_bundle(client, branch, full=full)
            except SandboxError as exc:
                return str(exc)
            try:
                landed = host.receive_bundle(repo, branch=branch, bundle=data, force=force)
            except GitHostError as exc:
                if exc.status == 412 and not full:
                    continue  # the repository lacks the thin bundle's base: send it all
                return exc.message
            done = client.exec(PUSHED, env={"OA_BRANCH": branch, "OA_SHA": landed or sha})
            if done.get("exitCode") != 0:  # pushed all the same; status just looks ahead
                log.warning("session %s: upstream not recorded: %s", session.id, _tail(done))
            return None
        return "the repository refused the bundle"  # pragma: no cover - the loop returns

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


def _is_local(clone_url: str | None) -> bool:
    return (clone_url or "").startswith(("file://", "/"))


def _read_bundle(client: GitClient, branch: str, *, full: bool) -> tuple[bytes, str]:
    """Bundle the branch in the sandbox and read it back in base64 chunks; (bytes, commit)."""
    env = {"OA_BRANCH": branch, "OA_FULL": "1" if full else "0"}
    made = client.exec(BUNDLE, env=env, timeout_seconds=PUSH_TIMEOUT_SECONDS)
    if made.get("exitCode") != 0:
        raise SandboxError(f"bundle failed: {_tail(made)}")
    lines = [*str(made.get("stdout", "")).strip().split("\n"), "", "", "", ""]
    path, sha256, size, sha = (line.strip() for line in lines[:4])
    try:
        total = int(size)
    except ValueError:
        raise SandboxError("bundle failed: no size") from None
    if not (path.startswith("/") and path.endswith("/push.bundle")):
        raise SandboxError(f"bundle failed: unexpected path {path[:200]!r}")
    quoted = shlex.quote(path)
    try:
        if total > MAX_BUNDLE_BYTES:
            raise SandboxError(f"the bundle is larger than {MAX_BUNDLE_BYTES} bytes")
        data = bytearray()
        while len(data) < total:
            count = min(READ_CHUNK_BYTES, total - len(data))
            chunk = client.exec(
                f"tail -c +{len(data) + 1} {quoted} | head -c {count} | base64 -w0",
                timeout_seconds=PUSH_TIMEOUT_SECONDS,
                max_output_bytes=16 << 20,
            )
            piece = (
                base64.b64decode(str(chunk.get("stdout", "")))
                if chunk.get("exitCode") == 0
                else b""
            )
            if not piece:
                raise SandboxError(f"reading the bundle failed: {_tail(chunk)}")
            data += piece
    finally:
        client.exec(f"rm -rf -- {shlex.quote(path.removesuffix('/push.bundle'))}")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SandboxError("the bundle read back does not match its sha256")
    return bytes(data), sha


def _choose(override: bool | None, preference: bool) -> bool:
    return override if override is not None else preference


def _tail(result: dict[str, Any]) -> str:
    return str(result.get("stderr") or result.get("stdout") or "").strip()[-300:]
