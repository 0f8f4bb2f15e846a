"""Auto-commit and auto-PR when an agent ends a turn (reference §4.9, issue "Archive").

Commit everything with a conventional message, push the branch and, when auto-PR is on, create
the pull request or sync the open one. The sandbox never pushes and never holds a git token
(everything in it is treated as an attacker: a hook, a config, a leftover process): it hands
the branch over as a git bundle (``POST /git/bundle``, data) and the git host writes it into the
repository (``ReceivesPushes``) — a local repository through a hardened fetch, GitHub over smart
HTTP with the token, from the control plane. A thin bundle first, the whole branch when the
repository lacks the thin one's base; then ``POST /git/upstream`` records the push in the
sandbox. What may be pushed is the control plane's word, never the sandbox's: only the session's
own branch (``Session.own_branch``, recorded at create), and only while the sandbox has it
checked out; never the host's default branch, nor anything when the host cannot name it. Skips
are recorded with their reason (the audit entry and the chat's commit card). Every outcome is
an audit entry (and so an event); nothing here ever fails the agent's call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from openagents.domain.lifecycle import LOOPED_STATES
from openagents.domain.models import PrStatus, Repo, Session, pr_key
from openagents.domain.runs import Run
from openagents.git import GitHost, GitHostError, ReceivesPushes
from openagents.sandbox.port import GitStatus, Sandboxd, SandboxdClients, SandboxError
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.archive import git_identity
from openagents.services.git_cards import Card, CardValue, GitCards
from openagents.services.transitions import Change, Entry, Transitions
from openagents.store.port import StaleState, Store

log = logging.getLogger(__name__)
MAX_BUNDLE_BYTES = 512 << 20
MAX_SHOWN_CHARS = 255  # a branch name the sandbox sends, as far as it is shown
NO_PUSH_HOST = "no git host takes pushes to this repository"
NO_OWN_BRANCH = (
    "the session has no branch of its own to push (it works on the repository's default "
    "branch, or was created before sessions recorded one)"
)


@dataclass(frozen=True)
class PushResult:
    """A push of the session's own branch (``AutoCommitService.push``): ``commit`` where it
    landed, else ``refused`` (a rule said no) or ``failed`` (the git host said no)."""

    branch: str | None
    base: str | None = None
    commit: str | None = None
    refused: str | None = None
    failed: str | None = None
    no_host: bool = False


def commit_message(status: GitStatus) -> str:
    files = [f.path for f in status.uncommitted_files]
    if len(files) == 1:
        return f"chore: update {files[0]}"[:72]
    return f"chore: update {len(files)} files"


class AutoCommitService:
    def __init__(
        self,
        store: Store,
        clients: SandboxdClients,
        git_host: GitHost | None,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        cards: GitCards | None = None,
    ) -> None:
        self._cards = cards
        self._store = store
        self._clients = clients
        self._git_host = git_host
        self._clock = clock
        self._ids = ids
        self._metrics = metrics
        self._transitions = Transitions(store, lambda: self._clock(), lambda: self._ids(), metrics)

    def after_turn(self, session: Session, run: Run | None = None) -> dict[str, Any]:
        """A finished turn's work committed and pushed (and its PR opened or synced), with
        its ``sandbox.auto_commit`` entry: keyed by ``run`` when the turn was a run, so a
        follow-up run again records it once."""
        prefs = self._store.get_user(session.user_id).preferences
        auto_commit = _choose(session.auto_commit_push_override, prefs.auto_commit_push)
        auto_pr = auto_commit and _choose(session.auto_create_pr_override, prefs.auto_create_pr)
        if not auto_commit:
            return {"skipped": "auto-commit is off"}
        if session.lifecycle_state not in LOOPED_STATES or not session.sandbox:
            return self._record(session, {"skipped": "no running sandbox"}, run)
        try:
            outcome = self._commit_and_push(session, self._clients(session.sandbox))
        except SandboxError as exc:
            outcome = {"skipped": f"sandbox error: {exc}"}
        if auto_pr and outcome.get("pushed"):
            outcome |= self._pull_request(session, outcome["branch"], outcome["base"])
        return self._record(session, outcome, run)

    def push(self, session: Session, client: Sandboxd) -> PushResult:
        """Push the session's own branch as it is committed (``POST /api/sessions/{id}/push``):
        the same rules as a turn's end (own branch, checked out, not the default branch, the
        host naming its default), the same bundle path."""
        own = session.own_branch
        if own is None:
            return PushResult(None, refused=NO_OWN_BRANCH)
        off = _off_branch(client.git_status(), own)
        if off is not None:
            return PushResult(own, refused=str(off["skipped"]))
        known = self._host_default_branch(session)
        if known is None:
            reason = "the git host did not name the repository's default branch"
            return PushResult(own, refused=reason, no_host=self._git_host is None)
        if own == known:
            return PushResult(own, known, refused=f"{own} is the default branch")
        failure, commit = self._push_bundle(session, client, session.repo, own)
        if failure is not None:
            no_host = failure == NO_PUSH_HOST
            return PushResult(own, known, failed=failure, no_host=no_host)
        return PushResult(own, known, commit=commit)

    def _commit_and_push(self, session: Session, client: Sandboxd) -> dict[str, Any]:
        own = session.own_branch
        if own is None:
            return {"skipped": NO_OWN_BRANCH}
        status = client.git_status()
        off = _off_branch(status, own)
        if off is not None:
            return off
        # the git host's word decides where a push may go, never the sandbox's: told "the
        # default is x" while on main, a push would land on main
        known = self._host_default_branch(session)
        base = known or client.git_remote().default_branch  # enough to decide a local commit
        if own == base:
            return {"skipped": f"{own} is the default branch", "branch": own}
        outcome: dict[str, Any] = {"branch": own, "base": known, "committed": False}
        if status.has_uncommitted_changes:
            subject = commit_message(status)
            try:
                done = client.git_commit(subject, *git_identity(session))
            except SandboxError as exc:
                return outcome | {"skipped": f"commit failed: {_tail(exc)}"}
            outcome |= {"committed": True, "commit": done.head, "subject": subject}
        elif not status.has_unpushed_commits:
            return outcome | {"pushed": False, "skipped": "nothing to commit or push"}
        if known is None:
            reason = "the git host did not name the repository's default branch"
            return outcome | {"pushed": False, "skipped": f"push skipped: {reason}"}
        failure, _ = self._push_bundle(session, client, session.repo, own)
        if failure is not None:
            return outcome | {"pushed": False, "skipped": f"push failed: {failure}"}
        return outcome | {"pushed": True}

    def _push_bundle(
        self, session: Session, client: Sandboxd, repo: Repo, branch: str
    ) -> tuple[str | None, str | None]:
        """Push through the git host: a thin bundle first, the whole branch when the repository
        lacks the thin one's prerequisites. (None, the commit): pushed; (why not, None)."""
        host = self._git_host
        if not isinstance(host, ReceivesPushes) or not host.receives(repo):
            return NO_PUSH_HOST, None
        # force only on the branch the session made for itself; never on a given one
        force = session.is_new_branch
        for full in (False, True):
            try:
                head = client.git_branch().head
                data = client.git_bundle(branch=branch, thin=not full, max_bytes=MAX_BUNDLE_BYTES)
            except SandboxError as exc:
                return f"bundle failed: {_tail(exc)}", None
            try:
                landed = host.receive_bundle(repo, branch=branch, bundle=data, force=force)
            except GitHostError as exc:
                if exc.status == 412 and not full:
                    continue  # the repository lacks the thin bundle's base: send it all
                return exc.message, None
            commit = landed or head
            try:
                if commit is not None:
                    client.git_upstream(branch, commit)
            except SandboxError as exc:  # pushed all the same; status just looks ahead
                log.warning("session %s: upstream not recorded: %s", session.id, _tail(exc))
            return None, commit
        return "the repository refused the bundle", None  # pragma: no cover - the loop returns

    def _pull_request(self, session: Session, branch: str, base: str | None) -> dict[str, Any]:
        if self._git_host is None or base is None:
            return {"pr": "skipped: no git host or default branch"}
        repo = session.repo
        created = False
        try:
            pr = self._git_host.pull_request_for_branch(repo, branch)
            if pr is None or pr.state is not PrStatus.OPEN:
                title = f"{session.title}: agent changes"
                body = f"Opened by Open Agents for session {session.id} ({session.title})."
                pr = self._git_host.create_pull_request(
                    repo, head_branch=branch, base_branch=base, title=title, body=body
                )
                created = True
        except GitHostError as exc:
            return {"pr": f"skipped: {exc}"}
        changes = Change(
            pr_number=pr.number,
            pr_status=PrStatus.OPEN,
            pr_key=pr_key(session.repo_owner, session.repo_name, pr.number),
        )
        try:
            self._transitions.move(session, LOOPED_STATES, changes)
        except StaleState:
            log.info("session %s moved on; PR #%s not recorded", session.id, pr.number)
        return {"prNumber": pr.number, "prUrl": pr.url, "prTitle": pr.title, "prCreated": created}

    def _host_default_branch(self, session: Session) -> str | None:
        """The repository's default branch as its git host tells it (None: no host, or it did
        not answer)."""
        if self._git_host is None:
            return None
        repo = session.repo
        try:
            return self._git_host.default_branch(repo)
        except GitHostError:
            return None

    def _record(self, session: Session, outcome: dict[str, Any], run: Run | None) -> dict[str, Any]:
        detail = {k: v for k, v in outcome.items() if v is not None}
        entry = Entry("sandbox.auto_commit", detail)
        if run is not None:  # one per run, at the run's end
            entry = Entry(entry.kind, detail, auto_commit_entry_id(run.id), run.finished_at)
        metric = "AutoCommitPushed" if outcome.get("pushed") else "AutoCommitSkipped"
        self._transitions.record(session, entry, metric=metric)
        if self._cards is not None:
            self._cards.record(session, *cards_of(outcome))
        return outcome


def auto_commit_entry_id(run_id: str) -> str:
    """The id of a run's ``sandbox.auto_commit`` entry (one per run)."""
    return f"{run_id}.auto_commit"


def cards_of(outcome: dict[str, Any]) -> list[Card]:
    """The chat cards of a turn's auto-commit: its commit, its push (or why not), its PR."""
    cards: list[Card] = []
    branch = outcome.get("branch")
    if outcome.get("committed"):
        commit: dict[str, CardValue] = {
            "commit": outcome.get("commit"),
            "subject": outcome.get("subject"),
            "branch": branch,
        }
        cards.append(Card("commit", commit, "auto"))
    if "pushed" in outcome and (outcome.get("pushed") or outcome.get("committed")):
        pushed = bool(outcome.get("pushed"))
        push: dict[str, CardValue] = {
            "branch": branch,
            "commit": outcome.get("commit") if pushed else None,
            "pushed": pushed,
            "reason": None if pushed else outcome.get("skipped"),
        }
        cards.append(Card("push", push, "auto"))
    if outcome.get("prNumber") is not None:
        pr: dict[str, CardValue] = {
            "number": outcome.get("prNumber"),
            "title": outcome.get("prTitle"),
            "state": "open",
            "url": outcome.get("prUrl"),
            "created": outcome.get("prCreated"),
        }
        cards.append(Card("pr", pr, "auto"))
    return cards


def _off_branch(status: GitStatus, own: str) -> dict[str, Any] | None:
    """Why the sandbox's checkout is not the session's own branch to push; None when it is."""
    current = status.branch
    if status.is_detached_head or not current:
        return {"skipped": "detached HEAD", "branch": own}
    if current != own:  # the sandbox checked another branch out: not this session's to push
        shown = str(current)[:MAX_SHOWN_CHARS]
        reason = f"the sandbox is on {shown}, not the session's branch {own}"
        return {"skipped": reason, "branch": own, "sandboxBranch": shown}
    return None


def _choose(override: bool | None, preference: bool) -> bool:
    return override if override is not None else preference


def _tail(error: SandboxError) -> str:
    """sandboxd's own words (git's, redacted), else the whole error; the end of it."""
    return (error.detail or str(error)).strip()[-300:]
