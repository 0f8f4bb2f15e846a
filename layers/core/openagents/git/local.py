"""The one-machine git host: local bare repositories (``file://`` clone URLs or absolute paths)
and a small pull request registry, so create, merge and close run without GitHub.

The registry is one JSON file (``<state_dir>/pull-requests.json``), keyed by the bare
repository's resolved path, numbered per repository, written atomically under a file lock.
``merge_pull_request`` performs a real ``git merge --no-ff`` in a temporary clone and pushes it;
the pull request is ``merged`` only once the head commit is an ancestor of the base branch in the
bare repository.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openagents.git import GitHostError, PrStatus, PullRequest, Repo

REGISTRY_FILE = "pull-requests.json"
GIT_TIMEOUT_SECONDS = 60
MERGER_NAME = "Open Agents"
MERGER_EMAIL = "openagents@localhost"

Record = dict[str, Any]
Registry = dict[str, Any]


def _now() -> datetime:
    return datetime.now(UTC)


class LocalGitHost:
    """The git host port on local bare repositories."""

    name = "local"

    def __init__(self, state_dir: Path, *, clock: Callable[[], datetime] = _now) -> None:
        self._state_dir = state_dir
        self._registry_path = state_dir / REGISTRY_FILE
        self._clock = clock

    # ------------------------------------------------------------------ the port

    def clone_token(self, repo: Repo) -> str | None:
        return None  # a local repository needs no credentials

    def pull_request(self, repo: Repo, number: int) -> PullRequest | None:
        bare = bare_repository(repo)
        record = self._records(bare).get(str(number))
        return None if record is None else _pull_request(bare, record)

    def pull_request_for_branch(self, repo: Repo, branch: str) -> PullRequest | None:
        bare = bare_repository(repo)
        mine = [r for r in self._records(bare).values() if r["headBranch"] == branch]
        if not mine:
            return None
        latest = max(mine, key=lambda r: (r["updatedAt"], r["number"]))
        return _pull_request(bare, latest)

    def create_pull_request(
        self, repo: Repo, *, head_branch: str, base_branch: str, title: str, body: str
    ) -> PullRequest:
        bare = _existing_repository(repo)
        _require_commits_between(bare, base_branch, head_branch)
        with self._registry() as registry:
            entry = _entry(registry, bare)
            existing = _open_record(entry, head_branch, base_branch)
            if existing is not None:  # what GitHub's 422 race resolves to
                return _pull_request(bare, existing)
            record = self._new_record(entry, head_branch, base_branch, title, body)
            entry["pullRequests"][str(record["number"])] = record
            return _pull_request(bare, record)

    def default_branch(self, repo: Repo) -> str | None:
        bare = bare_repository(repo)
        if not _is_git_dir(bare):
            return None
        return _git(bare, "symbolic-ref", "--quiet", "--short", "HEAD") or None

    # ------------------------------------------------------------------ local runtime helpers

    def merge_pull_request(self, repo: Repo, number: int) -> PullRequest:
        """Merge an open pull request for real (``--no-ff``, pushed to the bare repository)."""
        bare = _existing_repository(repo)
        with self._registry() as registry:
            record = _record(registry, bare, number)
            if record["state"] != PrStatus.OPEN:
                raise GitHostError(f"Pull request #{number} is {record['state']}", status=405)
            head_sha = _git(bare, "rev-parse", "--verify", f"refs/heads/{record['headBranch']}")
            merge_commit = _merge_in_clone(bare, record, head_sha)
            if not _is_ancestor(bare, head_sha, record["baseBranch"]):
                raise GitHostError(f"Pull request #{number} did not land on its base", status=409)
            self._transition(record, PrStatus.MERGED)
            record.update(headSha=head_sha, mergeCommit=merge_commit)
            return _pull_request(bare, record)

    def close_pull_request(self, repo: Repo, number: int) -> PullRequest:
        """Close without merging; closing a closed or merged pull request changes nothing."""
        bare = bare_repository(repo)
        with self._registry() as registry:
            record = _record(registry, bare, number)
            if record["state"] == PrStatus.OPEN:
                self._transition(record, PrStatus.CLOSED)
            return _pull_request(bare, record)

    def reopen_pull_request(self, repo: Repo, number: int) -> PullRequest:
        """Reopen a closed pull request (a merged one stays merged)."""
        bare = bare_repository(repo)
        with self._registry() as registry:
            record = _record(registry, bare, number)
            if record["state"] == PrStatus.MERGED:
                raise GitHostError(f"Pull request #{number} is merged", status=422)
            if record["state"] == PrStatus.CLOSED:
                entry = _entry(registry, bare)
                if _open_record(entry, record["headBranch"], record["baseBranch"]) is not None:
                    message = f"A pull request already exists for {record['headBranch']}"
                    raise GitHostError(message, status=422)
                self._transition(record, PrStatus.OPEN)
            return _pull_request(bare, record)

    # ------------------------------------------------------------------ registry

    def _records(self, bare: Path) -> dict[str, Record]:
        entry = _read(self._registry_path).get(str(bare), {})
        records: dict[str, Record] = entry.get("pullRequests", {})
        return records

    @contextlib.contextmanager
    def _registry(self) -> Iterator[Registry]:
        """The registry under an exclusive file lock, written back atomically on success."""
        self._state_dir.mkdir(parents=True, exist_ok=True)
        lock_path = self._registry_path.with_suffix(".lock")
        with lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            registry = _read(self._registry_path)
            yield registry
            _write_atomically(self._registry_path, registry)

    def _new_record(
        self, entry: dict[str, Any], head_branch: str, base_branch: str, title: str, body: str
    ) -> Record:
        number = int(entry["nextNumber"])
        entry["nextNumber"] = number + 1
        now = self._clock().isoformat()
        return {
            "number": number,
            "state": PrStatus.OPEN.value,
            "headBranch": head_branch,
            "baseBranch": base_branch,
            "title": title,
            "body": body,
            "createdAt": now,
            "updatedAt": now,
            "closedAt": None,
            "mergedAt": None,
        }

    def _transition(self, record: Record, state: PrStatus) -> None:
        now = self._clock().isoformat()
        record.update(
            state=state.value,
            updatedAt=now,
            closedAt=None if state is PrStatus.OPEN else now,
            mergedAt=now if state is PrStatus.MERGED else None,
        )


# ---------------------------------------------------------------------- repositories


def bare_repository(repo: Repo) -> Path:
    """The bare repository a local ``Repo`` points at (``file://`` URL or absolute path)."""
    url = (repo.clone_url or "").strip()
    path = url.removeprefix("file://")
    if not path.startswith("/"):
        raise GitHostError(f"Not a local repository: {url or repo.name or '(none)'}", status=400)
    return Path(path).resolve()


def _existing_repository(repo: Repo) -> Path:
    bare = bare_repository(repo)
    if not _is_git_dir(bare):
        raise GitHostError(f"Repository not found: {bare}", status=404)
    return bare


def _is_git_dir(path: Path) -> bool:
    if not path.is_dir():
        return False
    done = _run_git(path, "rev-parse", "--git-dir")
    return done.returncode == 0


def _require_commits_between(bare: Path, base_branch: str, head_branch: str) -> None:
    for role, branch in (("base", base_branch), ("head", head_branch)):
        if _run_git(bare, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode:
            raise GitHostError(f"The {role} branch {branch} does not exist", status=422)
    ahead = _git(bare, "rev-list", "--count", f"refs/heads/{base_branch}..refs/heads/{head_branch}")
    if int(ahead) == 0:
        raise GitHostError(f"No commits between {base_branch} and {head_branch}", status=422)


def _is_ancestor(bare: Path, commit: str, branch: str) -> bool:
    done = _run_git(bare, "merge-base", "--is-ancestor", commit, f"refs/heads/{branch}")
    return done.returncode == 0


def _merge_in_clone(bare: Path, record: Record, head_sha: str) -> str:
    """Merge the head into the base in a temporary clone, push, and return the merge commit."""
    number, head, base = record["number"], record["headBranch"], record["baseBranch"]
    with tempfile.TemporaryDirectory(prefix="openagents-merge-") as tmp:
        work = Path(tmp) / "work"
        _git(Path(tmp), "clone", "--quiet", "--branch", base, str(bare), str(work))
        identity = ("-c", f"user.name={MERGER_NAME}", "-c", f"user.email={MERGER_EMAIL}")
        message = f"Merge pull request #{number} from {head}"
        merged = _run_git(work, *identity, "merge", "--no-ff", "--no-edit", "-m", message, head_sha)
        if merged.returncode != 0:
            raise GitHostError(f"Pull request #{number} cannot be merged cleanly", status=409)
        _git(work, "push", "--quiet", "origin", f"HEAD:refs/heads/{base}")
        return _git(work, "rev-parse", "HEAD")


def _git(cwd: Path, *args: str) -> str:
    done = _run_git(cwd, *args)
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise GitHostError(f"git {args[0]} failed: {detail[0]}")
    return done.stdout.strip()


def _run_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        return subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["git", *args],  # noqa: S607 - git from PATH, as everywhere in the runtime
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitHostError(f"git {args[0]} failed: {type(exc).__name__}") from None


# ---------------------------------------------------------------------- registry file


def _read(path: Path) -> Registry:
    try:
        data: Registry = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise GitHostError(f"The pull request registry {path} is unreadable: {exc}") from None
    return data


def _write_atomically(path: Path, registry: Registry) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        json.dump(registry, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _entry(registry: Registry, bare: Path) -> dict[str, Any]:
    entry: dict[str, Any] = registry.setdefault(str(bare), {"nextNumber": 1, "pullRequests": {}})
    return entry


def _record(registry: Registry, bare: Path, number: int) -> Record:
    record: Record | None = _entry(registry, bare)["pullRequests"].get(str(number))
    if record is None:
        raise GitHostError(f"Pull request #{number} not found", status=404)
    return record


def _open_record(entry: dict[str, Any], head_branch: str, base_branch: str) -> Record | None:
    records: dict[str, Record] = entry["pullRequests"]
    for record in records.values():
        same_branches = (record["headBranch"], record["baseBranch"]) == (head_branch, base_branch)
        if same_branches and record["state"] == PrStatus.OPEN:
            return record
    return None


def _pull_request(bare: Path, record: Record) -> PullRequest:
    return PullRequest(
        number=int(record["number"]),
        state=PrStatus(record["state"]),
        url=f"file://{bare}#pull/{record['number']}",
        head_branch=str(record["headBranch"]),
        base_branch=str(record["baseBranch"]),
        title=str(record["title"]),
    )
