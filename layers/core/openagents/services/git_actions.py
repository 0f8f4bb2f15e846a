"""Shipping the work from the app (issue 25): commit, discard, push, open the pull request and
fix failing checks, for the session's git panel (docs/api.md, "Shipping the work").

The sandbox is an attacker's process: what it answers (status, diffs, logs) is data, capped,
shown to the model labelled as data and never trusted for a decision. Pushes and pull requests
go through the control plane's git host, from the session's own branch only (decision 33), by
the same path auto-commit takes (``AutoCommitService.push``); no token enters the sandbox.
Without a message, a title or a body the text is generated through the model port (the
session's latest chat's model); a generation that fails is a 502 ``generation_failed``, never a
made-up text, and nothing is committed or opened then."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from openagents.agent.models.port import (
    ChatModel,
    Finish,
    Message,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    TextDelta,
)
from openagents.agent.models.registry import ModelInfo
from openagents.domain import validation
from openagents.domain.checkpoints import Checkpoint, checkpoint_ref
from openagents.domain.errors import (
    Conflict,
    InvalidInput,
    SandboxNotRunning,
    SessionArchived,
    TurnConflict,
    Unavailable,
    UpstreamFailed,
)
from openagents.domain.identity import Identity
from openagents.domain.models import (
    LifecycleState,
    PrStatus,
    Session,
    SessionStatus,
    pr_key,
)
from openagents.domain.runs import Run
from openagents.git import CheckReport, CheckRun, GitHost, GitHostError, PullRequest, ReportsChecks
from openagents.sandbox.port import Sandboxd, SandboxdClients, SandboxError
from openagents.services import Clock, IdFactory, Metrics
from openagents.services import git_prompts as prompts
from openagents.services.archive import git_identity
from openagents.services.auto_commit import AutoCommitService
from openagents.services.git_cards import Card, CardValue, GitCards, latest_chat
from openagents.services.pull_requests import NoPullRequest
from openagents.services.sandbox_tools import public_detail, sandbox_of
from openagents.services.sessions import owned
from openagents.services.transitions import Change, Entry, Transitions
from openagents.store.port import StaleState, Store

T = TypeVar("T")

log = logging.getLogger(__name__)
ANY_STATE = frozenset(LifecycleState)
MAX_PATHS = 200  # times MAX_PATH_CHARS stays under the API's 1 MiB body limit
MAX_PATH_CHARS = 4096
MAX_OUTPUT = 4 << 20  # what one git command in the sandbox may print for us
MAX_LISTED = 1000  # paths a discard answers
MAX_FIX_CHECKS = 20
MAX_LOG_BYTES = 2 << 20  # the tail of a check's log read
GIT_TIMEOUT = 60
FAILED = frozenset(
    {"failure", "timed_out", "cancelled", "action_required", "startup_failure", "stale"}
)
PASSED = frozenset({"success", "neutral", "skipped"})
Purpose = Literal["commit_message", "pull_request"]
# a copy of the real index, so a generation's `git add -A` never stages anything for real
STAGED_DIFF = (
    "idx=$(mktemp) && trap 'rm -f \"$idx\"' EXIT && src=$(git rev-parse --git-path index) && "
    '{ cp "$src" "$idx" 2>/dev/null || rm -f "$idx"; } && export GIT_INDEX_FILE="$idx" && '
    "git add -A && git diff --cached --stat --no-color && echo && "
    "git diff --cached --no-color --no-ext-diff --no-textconv"
)


class NothingToCommit(Conflict):
    code = "nothing_to_commit"


class CommitRefused(Conflict):
    code = "commit_refused"


class NothingToDiscard(Conflict):
    code = "nothing_to_discard"


class PushRefused(Conflict):
    code = "push_refused"


class BranchNotPushed(Conflict):
    code = "branch_not_pushed"


class NoFailingChecks(Conflict):
    code = "no_failing_checks"


class NoGitHost(InvalidInput):
    code = "no_git_host"


class GenerationFailed(UpstreamFailed):
    code = "generation_failed"


class PushFailed(UpstreamFailed):
    code = "push_failed"


class GitHostFailed(UpstreamFailed):
    code = "git_host_error"


class DiscardFailed(UpstreamFailed):
    code = "discard_failed"


class Models(Protocol):
    """The model registry as the generations use it."""

    def model(self, model_id: str) -> ChatModel: ...
    def default(self) -> ModelInfo: ...


class Turns(Protocol):
    """``AgentTurns.post``: the chat post's path, which starts an ordinary turn."""

    def post(
        self,
        identity: Identity,
        session_id: str,
        chat_id: str,
        message: Mapping[str, Any],
        model_id: str | None,
    ) -> Run: ...


@dataclass(frozen=True)
class Committed:
    commit: str
    subject: str
    body: str
    generated: bool
    branch: str | None


@dataclass(frozen=True)
class Discarded:
    restored: list[str]
    removed: list[str]
    saved: Checkpoint


@dataclass(frozen=True)
class Pushed:
    branch: str
    commit: str
    base: str | None


@dataclass(frozen=True)
class Opened:
    pull: PullRequest
    created: bool


@dataclass(frozen=True)
class FixStarted:
    run: Run
    chat_id: str
    checks: tuple[CheckRun, ...]


def host_error(exc: GitHostError, what: str) -> Exception:
    """A git host's failure as the API says it: 503 when it may pass, else 502."""
    if exc.status is None or exc.status >= 500 or exc.retry_after is not None:
        return Unavailable(f"The git host could not be reached ({what}): {exc.message}")
    return GitHostFailed(f"The git host refused ({what}): {exc.message}")


def no_turn(session: Session) -> None:
    """409 while a turn runs in the session (its workspace is the turn's)."""
    if session.has_streaming:
        raise TurnConflict(
            "A turn is running in this session; wait for it or stop it", field="sessionId"
        )


def check_failed(check: CheckRun) -> bool:
    return check.status == "completed" and (check.conclusion or "") in FAILED


class GitActions:
    def __init__(
        self,
        store: Store,
        clients: SandboxdClients,
        git_host: GitHost | None,
        auto_commit: AutoCommitService,
        cards: GitCards,
        models: Models,
        turns: Callable[[], Turns],
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        *,
        host_setting: str,
    ) -> None:
        self._store, self._clients, self._git_host = store, clients, git_host
        self._auto_commit, self._cards, self._models, self._turns = (
            auto_commit,
            cards,
            models,
            turns,
        )
        self._clock, self._ids, self._metrics = clock, ids, metrics
        self._moves = Transitions(store, clock, ids, metrics)  # every write: state and entry
        self._host_setting = host_setting

    # ------------------------------------------------------------------ commit

    def commit(self, identity: Identity, session_id: str, message: str | None) -> Committed:
        session, client = self._live(identity, session_id)
        no_turn(session)
        status = self._sandbox(lambda: client.git_status())
        if status.is_detached_head or not status.branch:
            raise CommitRefused("The sandbox is on a detached HEAD: check a branch out first")
        if not status.has_uncommitted_changes:
            raise NothingToCommit("Nothing to commit: the working tree is clean")
        generated = message is None
        if message is None:
            diff = self._git_output(client, STAGED_DIFF)
            subject, body = self._generated(
                session, "commit_message", prompts.commit_prompt(diff), prompts.commit_message
            )
            text = f"{subject}\n\n{body}" if body else subject
        else:
            text = message.strip()
            subject, _, rest = text.partition("\n")
            body = rest.strip()
        try:
            place = client.git_commit(text, *git_identity(session))
        except SandboxError as exc:
            if exc.status == 422 and "nothing" in (exc.detail or "").lower():
                raise NothingToCommit("Nothing to commit: the working tree is clean") from None
            raise self._sandbox_error(exc) from None
        commit = place.head or ""
        branch = str(status.branch)
        detail = {"commit": commit, "subject": subject, "branch": branch, "generated": generated}
        self._moves.record(session, _entry("git.committed", detail), metric="GitCommitted")
        card: dict[str, CardValue] = {"commit": commit, "subject": subject, "branch": branch}
        self._cards.record(session, Card("commit", card, "button"))
        return Committed(commit, subject, body, generated, branch)

    # ------------------------------------------------------------------ discard

    def discard(
        self, identity: Identity, session_id: str, paths: Sequence[str] | None
    ) -> Discarded:
        specs = _pathspecs(paths)
        session, client = self._live(identity, session_id)
        no_turn(session)
        listed = self._git_output(
            client, f"git status --porcelain=v1 -z --untracked-files=all -- {specs}"
        )
        restored, removed, staged = _changes(listed)
        if not restored and not removed:
            raise NothingToDiscard("Nothing to discard: no uncommitted changes there")
        ref = checkpoint_ref(f"discard-{self._ids()}")
        saved = self._sandbox(lambda: client.checkpoint(ref))
        done = self._sandbox(
            lambda: client.exec(
                (
                    f"git restore --source=HEAD --staged --worktree -- {_literal(staged)} && "
                    if staged
                    else ""
                )
                + f"git clean -fdq -- {specs}",
                timeout_seconds=GIT_TIMEOUT,
                max_output_bytes=64 << 10,
            )
        )
        if done.exit_code != 0:
            tail = public_detail(done.stderr or done.stdout)[-300:]
            raise DiscardFailed(f"git could not discard the changes: {tail.strip()}")
        detail: dict[str, Any] = {
            "restoredCount": len(restored),
            "removedCount": len(removed),
            "restored": restored[:100],
            "removed": removed[:100],
            "saved": saved.to_json(),
        }
        self._moves.record(session, _entry("git.discarded", detail))
        self._metrics.count("GitDiscarded")
        return Discarded(restored[:MAX_LISTED], removed[:MAX_LISTED], saved)

    # ------------------------------------------------------------------ push

    def push(self, identity: Identity, session_id: str) -> Pushed:
        session, client = self._live(identity, session_id)
        try:
            result = self._auto_commit.push(session, client)
        except SandboxError as exc:
            raise self._sandbox_error(exc) from None
        if result.no_host:
            raise NoGitHost(self._no_host_message(), field=None)
        if result.refused is not None:
            raise PushRefused(f"Cannot push: {result.refused}", field="sessionId")
        if result.failed is not None or result.branch is None or result.commit is None:
            raise PushFailed(f"The git host refused the push: {result.failed or 'no commit'}")
        detail = {"branch": result.branch, "commit": result.commit, "base": result.base}
        self._moves.record(session, _entry("git.pushed", detail), metric="GitPushed")
        card: dict[str, CardValue] = {
            "branch": result.branch,
            "commit": result.commit,
            "pushed": True,
            "reason": None,
        }
        self._cards.record(session, Card("push", card, "button"))
        return Pushed(result.branch, result.commit, result.base)

    # ------------------------------------------------------------------ pull request

    def open_pull_request(
        self,
        identity: Identity,
        session_id: str,
        *,
        title: str | None,
        body: str | None,
        draft: bool,
        base: str | None,
    ) -> Opened:
        session = self._unarchived(identity, session_id)
        host = self._host()
        own = session.own_branch
        if own is None:
            raise PushRefused(
                "The session has no branch of its own to open a pull request from",
                field="sessionId",
            )
        if base is not None:
            validation.branch(base, field="base")
        if base is not None and base == own:
            raise InvalidInput("base is the session's own branch", field="base")
        repo = session.repo
        try:
            existing = host.pull_request_for_branch(repo, own)
            if existing is not None and existing.state is PrStatus.OPEN:
                self._keep(session, existing)
                return Opened(existing, created=False)
            target = base or host.default_branch(repo)
        except GitHostError as exc:
            raise host_error(exc, "reading the repository") from None
        if target is None:
            raise GitHostFailed("The git host did not name the repository's default branch")
        if title is None or body is None:
            gen_title, gen_body = self._pr_text(identity, session, own, target)
            title = title if title is not None else gen_title
            body = body if body is not None else gen_body
        try:
            pull = host.create_pull_request(
                repo, head_branch=own, base_branch=target, title=title, body=body, draft=draft
            )
        except GitHostError as exc:
            text = exc.message.lower()
            if exc.status == 422 and ("head" in text or "no commits" in text):
                raise BranchNotPushed(
                    f"The branch {own} is not on the git host with commits past {target}: "
                    f"push first ({exc.message})",
                    field="sessionId",
                ) from None
            raise host_error(exc, "opening the pull request") from None
        self._keep(session, pull, created=True)
        self._metrics.count("GitPullRequestOpened")
        card: dict[str, CardValue] = {
            "number": pull.number,
            "title": pull.title,
            "state": pull.state.value,
            "url": pull.url,
            "created": True,
        }
        self._cards.record(session, Card("pr", card, "button"))
        return Opened(pull, created=True)

    def _pr_text(
        self, identity: Identity, session: Session, branch: str, base: str
    ) -> tuple[str, str]:
        _, client = self._live(identity, session.id)
        upstream = shlex.quote(f"origin/{base}")
        commits = self._git_output(
            client, f"git log --no-color --format='%h %s' {upstream}..HEAD -- | head -n 200"
        )
        diff = self._git_output(
            client,
            f"git diff --stat --no-color {upstream}...HEAD && echo && "
            f"git diff --no-color --no-ext-diff --no-textconv {upstream}...HEAD",
        )
        prompt = prompts.pull_request_prompt(
            session_title=session.title,
            branch=branch,
            base=base,
            commits=commits.strip(),
            diff=diff,
            last_turn=self._last_turn(session),
        )
        return self._generated(session, "pull_request", prompt, prompts.pull_request)

    def _last_turn(self, session: Session) -> str:
        """The text of the latest chat's last user message and what followed it."""
        chat = latest_chat(self._store.list_chats(session.id))
        if chat is None:
            return ""
        page = self._store.list_messages(session.id, chat.id, 20, None, before=True)
        lines: list[str] = []
        for message in page.items:
            parts = message.parts.get("parts")
            texts = [
                str(part.get("text", "")).strip()
                for part in (parts if isinstance(parts, list) else [])
                if isinstance(part, dict) and part.get("type") == "text"
            ]
            text = " ".join(t for t in texts if t)
            if message.role.value == "user":
                lines = []
            if text:
                lines.append(f"{message.role.value.title()}: {text}")
        return "\n".join(lines)

    def _keep(self, session: Session, pull: PullRequest, *, created: bool = False) -> None:
        """The session's PR number, state and key, now; an audit entry when it was opened."""
        entry = None
        if created:
            detail = {"prNumber": pull.number, "prUrl": pull.url, "title": pull.title}
            entry = _entry("git.pr_opened", detail)
        change = Change(
            pr_number=pull.number,
            pr_status=pull.state,
            pr_key=pr_key(session.repo_owner, session.repo_name, pull.number),
        )
        unchanged = session.pr_number == pull.number and session.pr_status is pull.state
        if unchanged and entry is None:
            return
        try:
            self._moves.move(session, ANY_STATE, change, entry)
        except StaleState:  # deleted meanwhile: nothing to keep it on
            return

    # ------------------------------------------------------------------ checks/fix

    def fix_checks(
        self, identity: Identity, session_id: str, check_ids: Sequence[int] | None
    ) -> FixStarted:
        session = self._unarchived(identity, session_id)
        host = self._host()
        if not isinstance(host, ReportsChecks):
            raise NoGitHost("This git host reports no checks", field=None)
        if session.pr_number is None:
            raise NoPullRequest("The session has no pull request", field="sessionId")
        try:
            state = host.pull_request_state(session.repo, session.pr_number)
        except GitHostError as exc:
            raise Unavailable(f"The git host could not be read: {exc.message}") from None
        if state is None:
            raise NoPullRequest("The git host does not know the session's pull request")
        failing = _chosen(state.checks, check_ids)
        reports: list[CheckReport] = []
        for check in failing[:MAX_FIX_CHECKS]:
            try:
                reports.append(
                    host.check_report(session.repo, check.id, max_log_bytes=MAX_LOG_BYTES)
                )
            except GitHostError as exc:
                raise Unavailable(
                    f"Check run {check.id} could not be read: {exc.message}"
                ) from None
        prompt = prompts.fix_prompt(
            reports, pr_number=session.pr_number, branch=session.own_branch or session.branch or ""
        )
        chat = latest_chat(self._store.list_chats(session.id))
        if chat is None:  # pragma: no cover - a session always has a chat
            raise NoPullRequest("The session has no chat")
        message = {
            "id": self._ids(),
            "role": "user",
            "parts": [{"type": "text", "text": prompt.text}],
            "metadata": {"checksFix": {"checkRunIds": [check.id for check in failing]}},
        }
        run = self._turns().post(identity, session.id, chat.id, message, None)
        return FixStarted(run, chat.id, tuple(report.run for report in reports))

    # ------------------------------------------------------------------ helpers

    def _unarchived(self, identity: Identity, session_id: str) -> Session:
        session = owned(self._store.get_session(session_id), identity)
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        return session

    def _live(self, identity: Identity, session_id: str) -> tuple[Session, Sandboxd]:
        return sandbox_of(self._unarchived(identity, session_id), self._clients)

    def _host(self) -> GitHost:
        if self._git_host is None:
            raise NoGitHost(self._no_host_message(), field=None)
        return self._git_host

    def _no_host_message(self) -> str:
        return f"No git host takes this repository: set {self._host_setting}"

    def _sandbox(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except SandboxError as exc:
            raise self._sandbox_error(exc) from None

    @staticmethod
    def _sandbox_error(exc: SandboxError) -> Exception:
        if exc.status is not None and 400 <= exc.status < 500 and exc.status != 401:
            detail = public_detail(exc.detail or "The sandbox refused the request")
            return InvalidInput(detail, field=None)
        return SandboxNotRunning("The sandbox is unavailable. Please resume it.")

    def _git_output(self, client: Sandboxd, command: str) -> str:
        """A git command's output in the sandbox (its words: data); a failure is a 409."""
        done = self._sandbox(
            lambda: client.exec(command, timeout_seconds=GIT_TIMEOUT, max_output_bytes=MAX_OUTPUT)
        )
        if done.exit_code != 0:
            tail = public_detail(done.stderr)[-300:].strip()
            raise CommitRefused(f"git failed in the sandbox: {tail or 'no output'}")
        text = done.stdout
        if done.truncated:
            text += "\n[output cut by the sandbox's limit]"
        return text

    def _generated(
        self,
        session: Session,
        purpose: Purpose,
        prompt: str,
        parse: Callable[[str], tuple[str, str]],
    ) -> tuple[str, str]:
        what = "commit message" if purpose == "commit_message" else "pull request title and body"
        chat = latest_chat(self._store.list_chats(session.id))
        try:
            model_id = (chat.model_id if chat else None) or self._models.default().id
            model = self._models.model(model_id)
            request = ModelRequest(
                "You write git commit messages and pull request descriptions.",
                (Message.user(prompt),),
                max_tokens=2048,
                purpose=purpose,
            )
            text: list[str] = []
            for event in model.stream(request):
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, Finish) and event.stop_reason.failure_message is not None:
                    failure = event.stop_reason.failure_message
                    raise ModelError(ModelErrorKind.INVALID_RESPONSE, failure)
            return parse("".join(text))
        except prompts.GenerationUnusable as exc:
            raise GenerationFailed(f"Could not generate a {what}: {exc}") from None
        except ModelError as exc:
            reason = getattr(exc, "message", None) or str(exc) or "the model call did not finish"
            raise GenerationFailed(f"Could not generate a {what}: {reason}") from None
        except InvalidInput as exc:  # no model configured or the chat's is gone
            raise GenerationFailed(f"Could not generate a {what}: {exc.message}") from None


def _chosen(checks: Sequence[CheckRun], check_ids: Sequence[int] | None) -> list[CheckRun]:
    """The failing check runs to fix: all of them, or those of ``check_ids`` (400 for an id
    that is not one); 409 when none is failing."""
    failing = [check for check in checks if check_failed(check) and check.id > 0]
    if check_ids is not None:
        known = {check.id: check for check in failing}
        unknown = [str(i) for i in check_ids if i not in known]
        if unknown:
            raise InvalidInput(
                f"Not a failing check run of the pull request: {', '.join(unknown[:5])}",
                field="checkRunIds",
            )
        failing = [known[i] for i in dict.fromkeys(check_ids)]
    if not failing:
        raise NoFailingChecks("No check run of the pull request is failing")
    return failing


def _pathspecs(paths: Sequence[str] | None) -> str:
    """The shell-quoted literal pathspecs of ``paths`` (``.``: everything); 400 on ``paths``."""
    if paths is None:
        return "."
    if not paths:
        raise InvalidInput("paths must name at least one path (or be left out)", field="paths")
    if len(paths) > MAX_PATHS:
        raise InvalidInput(f"paths holds at most {MAX_PATHS} entries", field="paths")
    specs: list[str] = []
    for path in paths:
        clean = path.strip()
        parts = clean.replace("\\", "/").split("/")
        bad = (
            not clean
            or len(clean) > MAX_PATH_CHARS
            or clean.startswith("/")
            or ".." in parts
            or any(ord(ch) < 32 for ch in clean)
        )
        if bad:
            raise InvalidInput(
                f"paths: {clean[:80]!r} is not a relative path inside the workspace",
                field="paths",
            )
        specs.append(shlex.quote(f":(literal){clean}"))
    return " ".join(specs)


def _literal(paths: Sequence[str]) -> str:
    return " ".join(shlex.quote(f":(literal){path}") for path in paths)


def _changes(porcelain: str) -> tuple[list[str], list[str], list[str]]:
    """(restored, removed, known to git) of ``git status --porcelain=v1 -z``: a path HEAD has
    is restored; an untracked or newly added one is removed; what the index or HEAD knows is
    put back by ``git restore`` (the untracked by ``git clean``)."""
    restored: list[str] = []
    removed: list[str] = []
    staged: list[str] = []
    entries = porcelain.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC" and index < len(entries):  # the origin of a rename or copy follows
            origin = entries[index]
            index += 1
            if code[0] == "R":
                restored.append(origin)
                staged.append(origin)
            removed.append(path)
            staged.append(path)
        elif code == "??":
            removed.append(path)
        elif "A" in code:
            removed.append(path)
            staged.append(path)
        else:
            restored.append(path)
            staged.append(path)
    return restored, removed, staged


def _entry(kind: str, detail: Mapping[str, Any]) -> Entry:
    """An audit entry of the git actions: the detail's absent values left out."""
    return Entry(kind, {key: value for key, value in detail.items() if value is not None})
