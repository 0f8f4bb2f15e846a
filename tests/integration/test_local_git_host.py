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


# ---------------------------------------------------------------------- pushes as bundles


def sandbox_clone(origin: Origin, root: Path, branch: str = "oa/push") -> Path:
    """What a sandbox holds: a clone of the repository, on a branch of its own."""
    clone = root / "sandbox-clone"
    git(root, "clone", "-q", str(origin.bare), str(clone))
    git(clone, "config", "user.email", "agent@example.com")
    git(clone, "config", "user.name", "Agent")
    git(clone, "checkout", "-qb", branch)
    return clone


def commit(clone: Path, filename: str, text: str) -> str:
    (clone / filename).write_text(text)
    git(clone, "add", filename)
    git(clone, "commit", "-qm", f"add {filename}")
    return git(clone, "rev-parse", "HEAD")


def bundle(clone: Path, *refs: str, thin: bool = False) -> bytes:
    out = clone.parent / "push.bundle"
    out.unlink(missing_ok=True)
    git(clone, "bundle", "create", "-q", str(out), *refs, *(["--not", "--remotes"] if thin else []))
    return out.read_bytes()


def test_a_pushed_bundle_lands_on_the_branch(
    host: LocalGitHost, origin: Origin, tmp_path: Path
) -> None:
    clone = sandbox_clone(origin, tmp_path)
    first = commit(clone, "one.txt", "1\n")
    assert host.receives(origin.repo)
    landed = host.receive_bundle(
        origin.repo, branch="oa/push", bundle=bundle(clone, "refs/heads/oa/push"), force=False
    )
    assert landed == first == origin.tip("oa/push")
    git(clone, "update-ref", "refs/remotes/origin/oa/push", first)
    # a thin bundle (only the new commits) fast-forwards the branch
    second = commit(clone, "two.txt", "2\n")
    thin = bundle(clone, "refs/heads/oa/push", thin=True)
    assert host.receive_bundle(origin.repo, branch="oa/push", bundle=thin, force=False) == second
    assert git(origin.bare, "show", "oa/push:two.txt") == "2"
    assert origin.tip("main") == git(clone, "rev-parse", "main")  # nothing else moved


def test_a_bundle_that_updates_another_branch_is_refused(
    host: LocalGitHost, origin: Origin, tmp_path: Path
) -> None:
    clone = sandbox_clone(origin, tmp_path)
    commit(clone, "one.txt", "1\n")
    git(clone, "checkout", "-q", "main")
    commit(clone, "evil.txt", "main rewritten\n")
    main_before = origin.tip("main")
    for refs in (
        ("refs/heads/oa/push", "refs/heads/main"),  # the branch and another one
        ("refs/heads/main",),  # only another one
        ("refs/heads/oa/feature", "refs/tags/v1"),
    ):
        if "refs/tags/v1" in refs:
            git(clone, "tag", "-f", "v1")
            git(clone, "branch", "-f", "oa/feature", "main")
        with pytest.raises(GitHostError, match="may update only refs/heads/oa/push") as caught:
            host.receive_bundle(
                origin.repo, branch="oa/push", bundle=bundle(clone, *refs), force=True
            )
        assert caught.value.status == 403
    assert origin.tip("main") == main_before
    assert git(origin.bare, "branch", "--list", "oa/push") == ""
    assert git(origin.bare, "tag", "--list") == ""


def test_a_non_fast_forward_is_refused_unless_forced(
    host: LocalGitHost, origin: Origin, tmp_path: Path
) -> None:
    clone = sandbox_clone(origin, tmp_path)
    commit(clone, "one.txt", "1\n")
    host.receive_bundle(
        origin.repo, branch="oa/push", bundle=bundle(clone, "refs/heads/oa/push"), force=False
    )
    git(clone, "commit", "-q", "--amend", "-m", "rewritten")
    rewritten = bundle(clone, "refs/heads/oa/push")
    with pytest.raises(GitHostError, match="non-fast-forward") as caught:
        host.receive_bundle(origin.repo, branch="oa/push", bundle=rewritten, force=False)
    assert caught.value.status == 409
    landed = host.receive_bundle(origin.repo, branch="oa/push", bundle=rewritten, force=True)
    assert landed == git(clone, "rev-parse", "HEAD") == origin.tip("oa/push")


def test_a_bundle_missing_its_base_or_broken_is_refused(
    host: LocalGitHost, origin: Origin, tmp_path: Path
) -> None:
    clone = sandbox_clone(origin, tmp_path)
    commit(clone, "one.txt", "1\n")
    git(clone, "update-ref", "refs/remotes/origin/oa/push", "HEAD")  # pretend it was pushed
    commit(clone, "two.txt", "2\n")
    thin = bundle(clone, "refs/heads/oa/push", thin=True)
    with pytest.raises(GitHostError) as caught:
        host.receive_bundle(origin.repo, branch="oa/push", bundle=thin, force=False)
    assert caught.value.status == 412  # the sender retries with the whole branch
    with pytest.raises(GitHostError) as garbage:
        host.receive_bundle(origin.repo, branch="oa/push", bundle=b"not a bundle", force=False)
    assert garbage.value.status == 400
    with pytest.raises(GitHostError) as bad_name:
        host.receive_bundle(origin.repo, branch="oa/../x", bundle=thin, force=False)
    assert bad_name.value.status == 400
    assert git(origin.bare, "branch", "--list", "oa/push") == ""


# ---------------------------------------------------------------------- planted hooks and config

HOOKS = (
    "post-checkout",
    "post-merge",
    "reference-transaction",
    "pre-receive",
    "update",
    "post-receive",
    "post-update",
    "pre-auto-gc",
)


def plant(repo_git_dir: Path, markers: Path) -> None:
    """What a sandbox with a writable .git could have left behind: hooks, a hooks folder of its
    own, and an fsmonitor command — each touches a marker file when run."""
    markers.mkdir(exist_ok=True)
    planted = repo_git_dir / "planted-hooks"
    for folder in (repo_git_dir / "hooks", planted):
        folder.mkdir(exist_ok=True)
        for hook in HOOKS:
            script = folder / hook
            script.write_text(f"#!/bin/sh\ntouch {markers}/{hook}-{folder.name}\ncat >/dev/null\n")
            script.chmod(0o755)
    monitor = repo_git_dir / "fsmonitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {markers}/fsmonitor\n")
    monitor.chmod(0o755)
    config = repo_git_dir / "config"
    with config.open("a") as handle:
        handle.write(f"[core]\n\thooksPath = {planted}\n\tfsmonitor = {monitor}\n")
        handle.write("[gc]\n\tauto = 1\n")


def test_planted_hooks_and_fsmonitor_never_run_on_the_host(
    host: LocalGitHost, origin: Origin, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    plant(origin.bare, markers)
    # the plant works: plain git on the host runs it
    git(origin.bare, "update-ref", "refs/heads/probe", "main")
    assert (markers / "reference-transaction-planted-hooks").exists()
    git(origin.bare, "update-ref", "-d", "refs/heads/probe")
    for marker in markers.iterdir():
        marker.unlink()

    clone = sandbox_clone(origin, tmp_path)
    commit(clone, "one.txt", "1\n")
    host.receive_bundle(
        origin.repo, branch="oa/push", bundle=bundle(clone, "refs/heads/oa/push"), force=False
    )
    assert host.default_branch(origin.repo) == "main"
    number = open_feature_pr(host, origin, "oa/push")
    merged = host.merge_pull_request(origin.repo, number)

    assert merged.state is PrStatus.MERGED
    assert git(origin.bare, "show", "main:one.txt") == "1"
    assert sorted(marker.name for marker in markers.iterdir()) == []


def test_a_non_bare_host_repository_with_planted_hooks(
    host: LocalGitHost, origin: Origin, tmp_path: Path
) -> None:
    """A working repository (a user's checkout) as the session's repository: pushes and merges
    land in its .git without running its hooks; its checked-out branch is never moved."""
    work = origin.work  # on main, with origin as a remote
    markers = tmp_path / "markers"
    plant(work / ".git", markers)
    repo = Repo(clone_url=f"file://{work}")
    clone = tmp_path / "from-work"
    git(tmp_path, "clone", "-q", str(work), str(clone))
    git(clone, "checkout", "-qb", "oa/push")
    commit(clone, "one.txt", "1\n")
    host.receive_bundle(
        repo, branch="oa/push", bundle=bundle(clone, "refs/heads/oa/push"), force=False
    )
    number = host.create_pull_request(
        repo, head_branch="oa/push", base_branch="main", title="t", body="b"
    ).number
    with pytest.raises(GitHostError) as caught:  # main is checked out there: a remote refuses too
        host.merge_pull_request(repo, number)
    assert caught.value.status == 409
    git(clone, "checkout", "-q", "main")
    git(clone, "merge", "-q", "oa/push")
    with pytest.raises(GitHostError):
        host.receive_bundle(
            repo, branch="main", bundle=bundle(clone, "refs/heads/main"), force=True
        )
    assert not (work / "one.txt").exists()
    assert sorted(marker.name for marker in markers.iterdir()) == []


def test_the_host_refuses_repositories_outside_its_roots(
    state_dir: Path, origin: Origin, tmp_path: Path
) -> None:
    from openagents.git.roots import local_repo_roots

    elsewhere = LocalGitHost(state_dir, roots=local_repo_roots([tmp_path / "other"], state_dir))
    with pytest.raises(GitHostError, match="OPENAGENTS_LOCAL_REPO_ROOTS") as caught:
        elsewhere.receive_bundle(origin.repo, branch="oa/x", bundle=b"", force=False)
    assert caught.value.status == 403
    with pytest.raises(GitHostError):
        elsewhere.merge_pull_request(origin.repo, 1)
    inside = LocalGitHost(state_dir, roots=local_repo_roots([tmp_path], state_dir))
    assert inside.default_branch(origin.repo) == "main"


def git_input(cwd: Path, text: str, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=text, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def evil_tree(clone: Path, *path: str) -> str:
    """A commit on the clone's branch whose tree holds ``config`` under ``path`` (git's own
    commands refuse to write such a tree: built from objects)."""
    blob = git_input(clone, "[core]\n\tfsmonitor = evil\n", "hash-object", "-w", "--stdin")
    entry = f"100644 blob {blob}\tconfig\n"
    for name in reversed(path):
        entry = f"040000 tree {git_input(clone, entry, 'mktree')}\t{name}\n"
    tree = git_input(clone, entry, "mktree")
    head = git(clone, "commit-tree", tree, "-p", "HEAD", "-m", "evil")
    git(clone, "update-ref", "refs/heads/oa/push", head)
    return head


@pytest.mark.parametrize(
    "path", [(".git",), (".GIT",), ("src", ".Git"), ("a", "b", ".git"), ("git~1",), ("..",)]
)
def test_a_tree_holding_a_git_folder_is_refused(
    host: LocalGitHost, origin: Origin, tmp_path: Path, path: tuple[str, ...]
) -> None:
    clone = sandbox_clone(origin, tmp_path)
    commit(clone, "one.txt", "1\n")  # a clean commit below the evil one: every commit counts
    evil = evil_tree(clone, *path)
    commit(clone, "two.txt", "2\n")  # and a clean one above it
    with pytest.raises(GitHostError, match="The push is refused") as caught:
        host.receive_bundle(
            origin.repo, branch="oa/push", bundle=bundle(clone, "refs/heads/oa/push"), force=True
        )
    assert caught.value.status == 422
    assert git(origin.bare, "branch", "--list", "oa/push") == ""
    present = subprocess.run(["git", "cat-file", "-e", evil], cwd=origin.bare, check=False)
    assert present.returncode != 0  # nothing of the push entered the repository
