"""Whether a session's pull request can be merged (``GET /api/sessions/{id}/merge-readiness``):
the git host's pull request, its head's combined status and check runs, summed up as the
reasons that stop a merge. ``POST …/merge`` refuses with the same reasons (``blockers``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from openagents.domain.errors import Unavailable
from openagents.domain.identity import Identity
from openagents.domain.models import PrStatus, Session
from openagents.git import (
    CheckRun,
    GitHost,
    GitHostError,
    MergeMethod,
    PullRequestState,
    ReportsChecks,
)
from openagents.services.git_actions import PASSED, NoGitHost
from openagents.services.sessions import owned
from openagents.store.port import Store

log = logging.getLogger(__name__)
NO_PR = "The session has no pull request"
BLOCKING_STATES = frozenset({"dirty", "blocked"})


@dataclass(frozen=True)
class CheckCounts:
    required_total: int = 0
    passed: int = 0
    pending: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Readiness:
    can_merge: bool
    reasons: list[str]
    checks: CheckCounts
    allowed_methods: tuple[MergeMethod, ...]
    state: PullRequestState | None


def counts_of(checks: Sequence[CheckRun]) -> CheckCounts:
    """Passed (success, neutral, skipped), pending (not completed), failed (anything else)."""
    pending = sum(1 for check in checks if check.status != "completed")
    passed = sum(
        1 for check in checks if check.status == "completed" and check.conclusion in PASSED
    )
    return CheckCounts(len(checks), passed, pending, len(checks) - passed - pending)


def readiness_of(state: PullRequestState) -> Readiness:
    """The reasons that stop ``state``'s merge, one sentence each (none: it can merge)."""
    counts = counts_of(state.checks)
    failed, pending = counts.failed, counts.pending
    reasons: list[str] = []
    pull = state.pull
    if pull.state is not PrStatus.OPEN:
        reasons.append(f"The pull request is {pull.state.value}.")
    else:
        if state.draft:
            reasons.append("The pull request is a draft.")
        if state.mergeable is False or state.mergeable_state == "dirty":
            reasons.append("The pull request has conflicts with its base branch.")
        elif state.mergeable_state == "blocked":
            reasons.append("The base branch's protection rules block the merge.")
        if failed:
            reasons.append(f"{failed} check{'s' if failed > 1 else ''} failed.")
        if pending:
            reasons.append(f"{pending} check{'s are' if pending > 1 else ' is'} still running.")
        if not state.allowed_methods:
            reasons.append("The repository allows no merge method.")
    return Readiness(not reasons, reasons, counts, state.allowed_methods, state)


class MergeReadiness:
    def __init__(self, store: Store, git_host: GitHost | None, *, host_setting: str) -> None:
        self._store, self._git_host, self._host_setting = store, git_host, host_setting

    def readiness(self, identity: Identity, session_id: str) -> Readiness:
        session = owned(self._store.get_session(session_id), identity)
        host = self._git_host
        if host is None:
            raise NoGitHost(f"No git host takes this repository: set {self._host_setting}")
        if session.pr_number is None:
            return Readiness(False, [NO_PR], CheckCounts(), (), None)
        try:
            state = self._state(host, session, session.pr_number)
        except GitHostError as exc:
            raise Unavailable(f"The git host could not be read: {exc.message}") from None
        if state is None:
            reason = f"The git host does not know pull request #{session.pr_number}."
            return Readiness(False, [reason], CheckCounts(), (), None)
        return readiness_of(state)

    def blockers(self, session: Session) -> list[str]:
        """What stops the merge of the session's PR now; none when it cannot be told (the git
        host then decides)."""
        if self._git_host is None or session.pr_number is None:
            return []
        try:
            state = self._state(self._git_host, session, session.pr_number)
        except GitHostError as exc:
            log.info("merge readiness of %s unknown: %s", session.id, exc.message)
            return []
        return [] if state is None else readiness_of(state).reasons

    @staticmethod
    def _state(host: GitHost, session: Session, number: int) -> PullRequestState | None:
        if isinstance(host, ReportsChecks):
            return host.pull_request_state(session.repo, number)
        pull = host.pull_request(session.repo, number)
        if pull is None:
            return None
        return PullRequestState(pull, "", False, None, None, (), ("merge",))
