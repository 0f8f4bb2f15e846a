"""The one-machine git host on real bare repositories: default branch from HEAD, the pull
request registry (numbers, transitions, persistence) and real merges."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from openagents.domain.models import PrStatus, Repo
from openagents.git import GitHost, GitHostError
from openagents.git.local import LocalGitHost


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@dataclass(frozen=True)
class Origin:
    bare: Path
    work: Path  # a clone that pushes to the bare repository

    @property
    def repo(self) -> Repo:
        return Repo(owner=None, name=self.bare.stem, clone_url=f"file://{self.bare}")

    def commit_on(self, branch: str, filename: str, text: str) -> str:
        """Commit ``filename`` on ``branch`` (created from main when new) and push it."""
        exists = git(self.work, "branch", "--list", branch)
        git(self.work, "checkout", "-q", branch if exists else "-b", *([] if exists else [branch]))
        (self.work / filename).write_text(text)
        git(self.work, "add", filename)
        git(self.work, "commit", "-qm", f"{branch}: {filename}")
        git(self.work, "push", "-q", "origin", branch)
        git(self.work, "checkout", "-q", "main")
        return git(self.work, "rev-parse", branch)

    def tip(self, branch: str) -> str:
        return git(self.bare, "rev-parse", f"refs/heads/{branch}")


def make_origin(root: Path, name: str = "origin") -> Origin:
    bare, work = root / f"{name}.git", root / f"{name}-work"
    git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    git(root, "init", "-q", "-b", "main", str(work))
    git(work, "config", "user.email", "dev@example.com")
    git(work, "config", "user.name", "Dev")
    (work / "README.md").write_text("# demo\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "initial")
    git(work, "remote", "add", "origin", str(bare))
    git(work, "push", "-q", "origin", "main")
    return Origin(bare, work)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    made = make_origin(tmp_path)
    made.commit_on("oa/feature", "feature.txt", "feature\n")
    return made


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def host(state_dir: Path) -> LocalGitHost:
    return LocalGitHost(state_dir, clock=Clock())


def open_feature_pr(host: LocalGitHost, origin: Origin, branch: str = "oa/feature") -> int:
    created = host.create_pull_request(
        origin.repo, head_branch=branch, base_branch="main", title=f"PR {branch}", body="Body."
    )
    return created.number


# ---------------------------------------------------------------------- repository facts


def test_it_is_a_git_host(host: LocalGitHost) -> None:
    port: GitHost = host
    assert port.name == "local"


def test_default_branch_is_the_bare_repository_head(host: LocalGitHost, origin: Origin) -> None:
    assert host.default_branch(origin.repo) == "main"
    git(origin.bare, "symbolic-ref", "HEAD", "refs/heads/oa/feature")
    assert host.default_branch(origin.repo) == "oa/feature"


def test_unknown_repository_has_no_default_branch(host: LocalGitHost, tmp_path: Path) -> None:
    assert host.default_branch(Repo(clone_url=f"file://{tmp_path}/missing.git")) is None
    assert host.default_branch(Repo(clone_url=str(tmp_path))) is None  # not a git dir


def test_local_repositories_need_no_clone_token(host: LocalGitHost, origin: Origin) -> None:
    assert host.clone_token(origin.repo) is None


def test_a_plain_path_and_a_file_url_are_the_same_repository(
    host: LocalGitHost, origin: Origin
) -> None:
    number = open_feature_pr(host, origin)
    as_path = Repo(clone_url=f"{origin.work}/../{origin.bare.name}")
    found = host.pull_request(as_path, number)
    assert found is not None
    assert found.head_branch == "oa/feature"


def test_a_remote_repository_is_refused(host: LocalGitHost) -> None:
    remote = Repo(owner="octo", name="hello", clone_url="https://github.com/octo/hello.git")
    with pytest.raises(GitHostError) as caught:
        host.pull_request(remote, 1)
    assert caught.value.status == 400
    assert "Not a local repository" in str(caught.value)


# ---------------------------------------------------------------------- create and look up


def test_create_numbers_per_repository_and_persists(
    host: LocalGitHost, origin: Origin, state_dir: Path, tmp_path: Path
) -> None:
    created = host.create_pull_request(
        origin.repo, head_branch="oa/feature", base_branch="main", title="Add it", body="Why."
    )
    assert (created.number, created.state) == (1, PrStatus.OPEN)
    assert (created.head_branch, created.base_branch, created.title) == (
        "oa/feature",
        "main",
        "Add it",
    )
    assert created.url == f"file://{origin.bare.resolve()}#pull/1"

    origin.commit_on("oa/second", "second.txt", "2\n")
    assert open_feature_pr(host, origin, "oa/second") == 2
    other = make_origin(tmp_path, "other")
    other.commit_on("oa/feature", "x.txt", "x\n")
    assert open_feature_pr(host, other) == 1

    reloaded = LocalGitHost(state_dir)
    assert reloaded.pull_request(origin.repo, 1) == created
    registry = json.loads((state_dir / "pull-requests.json").read_text())
    assert registry[str(origin.bare.resolve())]["pullRequests"]["1"]["body"] == "Why."
    assert sorted(p.name for p in state_dir.iterdir()) == [
        "pull-requests.json",
        "pull-requests.lock",
    ]


def test_creating_again_while_open_returns_the_same_pull_request(
    host: LocalGitHost, origin: Origin
) -> None:
    first = open_feature_pr(host, origin)
    assert open_feature_pr(host, origin) == first
    assert host.pull_request(origin.repo, first + 1) is None


def test_create_needs_both_branches_and_commits_between(host: LocalGitHost, origin: Origin) -> None:
    with pytest.raises(GitHostError, match="head branch oa/missing does not exist") as missing:
        open_feature_pr(host, origin, "oa/missing")
    git(origin.bare, "branch", "oa/empty", "main")
    with pytest.raises(GitHostError, match="No commits between main and oa/empty") as empty:
        open_feature_pr(host, origin, "oa/empty")
    assert (missing.value.status, empty.value.status) == (422, 422)


def test_create_on_a_missing_repository_is_not_found(host: LocalGitHost, tmp_path: Path) -> None:
    with pytest.raises(GitHostError) as caught:
        host.create_pull_request(
            Repo(clone_url=f"file://{tmp_path}/none.git"),
            head_branch="a",
            base_branch="main",
            title="t",
            body="b",
        )
    assert caught.value.status == 404


def test_lookups_of_unknown_pull_requests_are_none(host: LocalGitHost, origin: Origin) -> None:
    assert host.pull_request(origin.repo, 1) is None
    assert host.pull_request_for_branch(origin.repo, "oa/feature") is None


def test_branch_lookup_returns_the_most_recently_updated(
    host: LocalGitHost, origin: Origin
) -> None:
    first = open_feature_pr(host, origin)
    host.close_pull_request(origin.repo, first)
    second = open_feature_pr(host, origin)
    assert second == first + 1

    latest = host.pull_request_for_branch(origin.repo, "oa/feature")
    assert latest is not None
    assert (latest.number, latest.state) == (second, PrStatus.OPEN)

    host.close_pull_request(origin.repo, second)
    host.reopen_pull_request(origin.repo, first)  # now the most recently updated
    latest = host.pull_request_for_branch(origin.repo, "oa/feature")
    assert latest is not None
    assert (latest.number, latest.state) == (first, PrStatus.OPEN)


def test_concurrent_creates_get_distinct_numbers(host: LocalGitHost, origin: Origin) -> None:
    branches = [f"oa/b{i}" for i in range(4)]
    for branch in branches:
        origin.commit_on(branch, f"{branch.replace('/', '-')}.txt", "x\n")
    with ThreadPoolExecutor(max_workers=4) as pool:
        numbers = list(pool.map(lambda b: open_feature_pr(host, origin, b), branches))
    assert sorted(numbers) == [1, 2, 3, 4]


# ---------------------------------------------------------------------- transitions


def test_merge_is_a_real_merge_into_the_base(host: LocalGitHost, origin: Origin) -> None:
    number = open_feature_pr(host, origin)
    head = origin.tip("oa/feature")
    base_before = origin.tip("main")

    merged = host.merge_pull_request(origin.repo, number)

    assert merged.state is PrStatus.MERGED
    main = origin.tip("main")
    git(origin.bare, "merge-base", "--is-ancestor", head, main)  # raises if not
    parents = git(origin.bare, "rev-list", "--parents", "-n", "1", main).split()[1:]
    assert parents == [base_before, head]
    assert git(origin.bare, "log", "-1", "--format=%s", main) == (
        f"Merge pull request #{number} from oa/feature"
    )
    assert host.pull_request(origin.repo, number) == merged
    branch_pr = host.pull_request_for_branch(origin.repo, "oa/feature")
    assert branch_pr is not None
    assert branch_pr.state is PrStatus.MERGED


def test_a_conflicting_merge_leaves_everything_as_it_was(
    host: LocalGitHost, origin: Origin
) -> None:
    origin.commit_on("oa/clash", "README.md", "theirs\n")
    number = open_feature_pr(host, origin, "oa/clash")
    origin.commit_on("main", "README.md", "ours\n")
    main_before = origin.tip("main")

    with pytest.raises(GitHostError, match="cannot be merged cleanly") as caught:
        host.merge_pull_request(origin.repo, number)

    assert caught.value.status == 409
    assert origin.tip("main") == main_before
    still = host.pull_request(origin.repo, number)
    assert still is not None
    assert still.state is PrStatus.OPEN


def test_close_reopen_and_the_merged_state_is_final(host: LocalGitHost, origin: Origin) -> None:
    number = open_feature_pr(host, origin)

    assert host.close_pull_request(origin.repo, number).state is PrStatus.CLOSED
    assert host.close_pull_request(origin.repo, number).state is PrStatus.CLOSED  # no-op
    with pytest.raises(GitHostError) as closed_merge:
        host.merge_pull_request(origin.repo, number)
    assert closed_merge.value.status == 405

    assert host.reopen_pull_request(origin.repo, number).state is PrStatus.OPEN
    assert host.merge_pull_request(origin.repo, number).state is PrStatus.MERGED
    assert host.close_pull_request(origin.repo, number).state is PrStatus.MERGED
    with pytest.raises(GitHostError, match="is merged") as reopen:
        host.reopen_pull_request(origin.repo, number)
    assert reopen.value.status == 422


def test_reopen_refuses_a_second_open_pull_request_for_the_branch(
    host: LocalGitHost, origin: Origin
) -> None:
    first = open_feature_pr(host, origin)
    host.close_pull_request(origin.repo, first)
    open_feature_pr(host, origin)
    with pytest.raises(GitHostError, match="already exists"):
        host.reopen_pull_request(origin.repo, first)


def test_transitions_of_unknown_pull_requests_are_not_found(
    host: LocalGitHost, origin: Origin
) -> None:
    for transition in (host.merge_pull_request, host.close_pull_request, host.reopen_pull_request):
        with pytest.raises(GitHostError) as caught:
            transition(origin.repo, 99)
        assert caught.value.status == 404


def test_registry_timestamps_follow_transitions(
    host: LocalGitHost, origin: Origin, state_dir: Path
) -> None:
    number = open_feature_pr(host, origin)
    host.merge_pull_request(origin.repo, number)
    registry = json.loads((state_dir / "pull-requests.json").read_text())
    record = registry[str(origin.bare.resolve())]["pullRequests"][str(number)]
    assert record["state"] == "merged"
    assert record["mergedAt"] == record["closedAt"] == record["updatedAt"]
    assert record["createdAt"] < record["mergedAt"]
    assert record["headSha"] == origin.tip("oa/feature")
    assert record["mergeCommit"] == origin.tip("main")


def test_an_unreadable_registry_is_a_clear_error(
    host: LocalGitHost, origin: Origin, state_dir: Path
) -> None:
    state_dir.mkdir()
    (state_dir / "pull-requests.json").write_text("{not json")
    with pytest.raises(GitHostError, match=r"registry .* is unreadable"):
        host.pull_request(origin.repo, 1)
