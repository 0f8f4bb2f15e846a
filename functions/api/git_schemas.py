"""Bodies of the shipping routes (``routes/git.py``): commit, discard, push, pull request, merge
readiness, fix checks (docs/api.md, "Shipping the work")."""

from typing import Annotated, Literal

from openagents.domain.runs import RunStatus
from openagents.git import CheckRun, PullRequest, PullRequestState
from openagents.services.git_actions import MAX_PATH_CHARS, MAX_PATHS
from openagents.services.merge_readiness import Readiness
from pydantic import AfterValidator, Field, StrictBool, StrictInt
from pydantic_core import PydanticCustomError

from functions.api.schemas import Body, Out, _no_controls

NoControls = AfterValidator(_no_controls)


def _multiline(value: str) -> str:
    """Newlines and tabs allowed; every other control character refused."""
    _no_controls(value.replace("\n", " ").replace("\r", " ").replace("\t", " "))
    if not value.strip():
        raise PydanticCustomError("invalid_input", "must not be blank")
    return value


Multiline = AfterValidator(_multiline)
BranchName = Annotated[str, Field(min_length=1, max_length=255)]


class CommitIn(Body):
    message: Annotated[str, Field(min_length=1, max_length=5000), Multiline] | None = None


class CommitOut(Out):
    commit: str
    subject: str
    body: str
    generated: bool
    branch: str | None


WorkspacePath = Annotated[str, Field(max_length=MAX_PATH_CHARS)]


class DiscardIn(Body):
    paths: Annotated[list[WorkspacePath], Field(max_length=MAX_PATHS)] | None = None


class CheckpointRef(Out):
    ref: str
    commit: str
    files: int


class DiscardOut(Out):
    restored: list[str]
    removed: list[str]
    saved: CheckpointRef


class PushOut(Out):
    branch: str
    commit: str
    base: str | None


class PullRequestIn(Body):
    title: Annotated[str, Field(min_length=1, max_length=256), Multiline] | None = None
    body: Annotated[str, Field(max_length=65536)] | None = None
    draft: StrictBool = False
    base: BranchName | None = None


class PullRequestOut(Out):
    number: int
    url: str
    state: Literal["open", "closed", "merged"]
    title: str
    head_branch: str
    base_branch: str

    @classmethod
    def of(cls, pull: PullRequest) -> "PullRequestOut":
        return cls(
            number=pull.number,
            url=pull.url,
            state=pull.state.value,
            title=pull.title,
            head_branch=pull.head_branch,
            base_branch=pull.base_branch,
        )


class OpenedOut(Out):
    pull_request: PullRequestOut
    created: bool


class ChecksOut(Out):
    required_total: int
    passed: int
    pending: int
    failed: int


class ReadinessPullOut(PullRequestOut):
    head_sha: str
    mergeable: bool | None
    mergeable_state: str | None
    draft: bool

    @classmethod
    def of_state(cls, state: PullRequestState) -> "ReadinessPullOut":
        base = PullRequestOut.of(state.pull)
        return cls(
            **base.model_dump(),
            head_sha=state.head_sha,
            mergeable=state.mergeable,
            mergeable_state=state.mergeable_state,
            draft=state.draft,
        )


class ReadinessOut(Out):
    can_merge: bool
    reasons: list[str]
    checks: ChecksOut
    allowed_methods: list[Literal["merge", "squash", "rebase"]]
    pr: ReadinessPullOut | None

    @classmethod
    def of(cls, readiness: Readiness) -> "ReadinessOut":
        counts = readiness.checks
        return cls(
            can_merge=readiness.can_merge,
            reasons=readiness.reasons,
            checks=ChecksOut(
                required_total=counts.required_total,
                passed=counts.passed,
                pending=counts.pending,
                failed=counts.failed,
            ),
            allowed_methods=list(readiness.allowed_methods),
            pr=ReadinessPullOut.of_state(readiness.state) if readiness.state else None,
        )


class FixChecksIn(Body):
    check_run_ids: Annotated[list[StrictInt], Field(min_length=1, max_length=20)] | None = None


class FixedCheckOut(Out):
    id: int
    name: str
    conclusion: str | None

    @classmethod
    def of(cls, check: CheckRun) -> "FixedCheckOut":
        return cls(id=check.id, name=check.name, conclusion=check.conclusion)


class FixStartedOut(Out):
    run_id: str
    status: RunStatus
    chat_id: str
    checks: list[FixedCheckOut]


class NewRepositoryIn(Body):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    private: StrictBool = True


class AttachRepositoryIn(Body):
    """`repoUrl` (an existing repository) or `create` (a new GitHub repository), one of them;
    `branch`: the branch the session pushes there (default: its own, else one named for it)."""

    repo_url: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    branch: BranchName | None = None
    create: NewRepositoryIn | None = None
