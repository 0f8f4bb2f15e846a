"""The one-machine git host: local bare repositories (``file://`` clone URLs or absolute paths)
and a small pull request registry, so create, merge and close run without GitHub.

The registry is one JSON file (``<state_dir>/pull-requests.json``), keyed by the bare
repository's resolved path, numbered per repository, written atomically under a file lock.
``merge_pull_request`` performs a real ``git merge --no-ff`` in a temporary clone and fetches
the result into the bare repository; the pull request is ``merged`` only once the head commit is
an ancestor of the base branch in the bare repository.

A sandbox never writes into a host repository: it sees it read-only and hands its pushes over as
a git bundle (``receive_bundle``). A repository may still hold config or hooks planted earlier
(or by whoever owns it), so every git command here runs hardened (``HARDENED``): hooks from an
empty folder of our own, no fsmonitor, no automatic gc, only the ``file`` transport, and
``safe.directory`` scoped to the repositories the command works on.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openagents.git import (
    CheckReport,
    GitHostError,
    MergeMethod,
    PrStatus,
    PullRequest,
    PullRequestState,
    Repo,
)
from openagents.git.catalog import (
    PAGE_SIZE,
    BadCursor,
    BadRepositoryUrl,
    BranchInfo,
    RepositoryInfo,
    RepositoryMissing,
    RepositoryPage,
    sorted_branches,
)
from openagents.git.roots import LocalRepoRefused, LocalRepoRoots, is_git_repository, real_path

REGISTRY_FILE = "pull-requests.json"
GIT_TIMEOUT_SECONDS = 60
MERGER_NAME = "Open Agents"
MERGER_EMAIL = "openagents@localhost"
MAX_BUNDLE_BYTES = 512 << 20
# Command-line config wins over a repository's own: nothing a repository's config or hooks
# folder says can make these commands run a program (hooksPath is added per call).
HARDENED = (
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.alternateRefsCommand=true",  # prints no refs; never a planted command
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "fetch.fsckObjects=true",
    "transfer.fsckObjects=true",
)

# What a pushed tree may not hold, as GitHub refuses it: a `.git` path component in any case or
# spelling git knows (`.GIT`, `git~1`, HFS's ignorable characters), `.`, `..`, `a//b`. fsck only
# warns about them, and git fetches a bundle without fsck at all (before 2.43), so each pushed
# pack is indexed apart first with these as errors (``_check_paths``).
STRICT_PATHS = tuple(
    f"fsck.{message}=error" for message in ("hasDotgit", "hasDot", "hasDotdot", "fullPathname")
)

Record = dict[str, Any]
Registry = dict[str, Any]


def _now() -> datetime:
    return datetime.now(UTC)


class LocalGitHost:
    """The git host port on local bare repositories."""

    name = "local"

    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Callable[[], datetime] = _now,
        roots: LocalRepoRoots | None = None,
    ) -> None:
        self._roots = roots  # None: any path (tests of the registry); the runtime passes them
        self._state_dir = state_dir
        self._registry_path = state_dir / REGISTRY_FILE
        self._clock = clock

    # ------------------------------------------------------------------ the port

    def clone_token(self, repo: Repo) -> str | None:
        return None  # a local repository needs no credentials

    def pull_request(self, repo: Repo, number: int) -> PullRequest | None:
        bare = self._bare(repo)
        record = self._records(bare).get(str(number))
        return None if record is None else _pull_request(bare, record)

    def pull_request_for_branch(self, repo: Repo, branch: str) -> PullRequest | None:
        bare = self._bare(repo)
        mine = [r for r in self._records(bare).values() if r["headBranch"] == branch]
        if not mine:
            return None
        latest = max(mine, key=lambda r: (r["updatedAt"], r["number"]))
        return _pull_request(bare, latest)

    def create_pull_request(
        self,
        repo: Repo,
        *,
        head_branch: str,
        base_branch: str,
        title: str,
        body: str,
        draft: bool = False,
    ) -> PullRequest:
        bare = self._existing(repo)
        _require_commits_between(bare, base_branch, head_branch)
        with self._registry() as registry:
            entry = _entry(registry, bare)
            existing = _open_record(entry, head_branch, base_branch)
            if existing is not None:  # what GitHub's 422 race resolves to
                return _pull_request(bare, existing)
            record = self._new_record(entry, head_branch, base_branch, title, body)
            record["draft"] = draft
            entry["pullRequests"][str(record["number"])] = record
            return _pull_request(bare, record)

    def pull_request_state(self, repo: Repo, number: int) -> PullRequestState | None:
        """A local pull request runs no checks; merging is a plain merge (``ReportsChecks``)."""
        bare = self._bare(repo)
        record = self._records(bare).get(str(number))
        if record is None:
            return None
        head = _git(bare, "rev-parse", "--verify", "--quiet", f"refs/heads/{record['headBranch']}")
        return PullRequestState(
            pull=_pull_request(bare, record),
            head_sha=head,
            draft=bool(record.get("draft")),
            mergeable=None,
            mergeable_state=None,
            checks=(),
            allowed_methods=("merge",),
        )

    def check_report(self, repo: Repo, check_id: int, *, max_log_bytes: int) -> CheckReport:
        raise GitHostError(
            f"Check run {check_id} not found (local repositories run none)", status=404
        )

    def default_branch(self, repo: Repo) -> str | None:
        bare = self._bare(repo)
        if not _is_git_dir(bare):
            return None
        return _git(bare, "symbolic-ref", "--quiet", "--short", "HEAD") or None

    # ------------------------------------------------------------------ pushes (ReceivesPushes)

    def receives(self, repo: Repo) -> bool:
        url = (repo.clone_url or "").strip()
        return url.startswith(("file://", "/"))

    def receive_bundle(self, repo: Repo, *, branch: str, bundle: bytes, force: bool) -> str:
        """Fetch a sandbox's push (a git bundle holding only ``refs/heads/<branch>``) into the
        repository, hardened; fast-forward only unless ``force``. Returns the branch's commit."""
        bare = self._existing(repo)
        ref = f"refs/heads/{branch}"
        if _run_git(bare, "check-ref-format", ref).returncode or branch.startswith("-"):
            raise GitHostError(f"Invalid branch name: {branch!r}", status=400)
        if len(bundle) > MAX_BUNDLE_BYTES:
            raise GitHostError(f"The bundle exceeds {MAX_BUNDLE_BYTES} bytes", status=413)
        with tempfile.TemporaryDirectory(prefix="openagents-push-") as tmp:
            path = Path(tmp) / "push.bundle"
            path.write_bytes(bundle)
            verified = _run_git(bare, "bundle", "verify", str(path))
            if verified.returncode != 0:
                missing = "prerequisite" in verified.stderr
                detail = _last_line(verified)
                raise GitHostError(
                    f"The bundle does not verify: {detail}", status=412 if missing else 400
                )
            heads = [
                line.split() for line in _git(bare, "bundle", "list-heads", str(path)).splitlines()
            ]
            if [head[1:] for head in heads] != [[ref]]:
                named = ", ".join(head[-1] for head in heads if head) or "none"
                raise GitHostError(f"The bundle may update only {ref}, not: {named}", status=403)
            sha = heads[0][0]
            _check_paths(bare, path, Path(tmp) / "check.pack")
            refspec = f"{'+' if force else ''}{ref}:{ref}"
            fetched = _run_git(
                bare,
                "fetch",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                str(path),
                refspec,
            )
            if fetched.returncode != 0:
                detail = _last_line(fetched)
                if "non-fast-forward" in fetched.stderr or "rejected" in fetched.stderr:
                    raise GitHostError(f"Push to {branch} refused (non-fast-forward)", status=409)
                raise GitHostError(f"Push to {branch} failed: {detail}", status=409)
        landed = _git(bare, "rev-parse", "--verify", ref)
        if landed != sha:
            raise GitHostError(f"Push to {branch} did not land", status=409)
        return landed

    # ------------------------------------------------------------------ local runtime helpers

    def merge_pull_request(
        self, repo: Repo, number: int, *, method: MergeMethod = "merge"
    ) -> PullRequest:
        """Merge an open pull request for real into its base branch in the bare repository: a
        merge commit (``--no-ff``) whatever ``method`` asks (one machine keeps the history
        whole; squash and rebase are GitHub's)."""
        bare = self._existing(repo)
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
        bare = self._bare(repo)
        with self._registry() as registry:
            record = _record(registry, bare, number)
            if record["state"] == PrStatus.OPEN:
                self._transition(record, PrStatus.CLOSED)
            return _pull_request(bare, record)

    def reopen_pull_request(self, repo: Repo, number: int) -> PullRequest:
        """Reopen a closed pull request (a merged one stays merged)."""
        bare = self._bare(repo)
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

    # ------------------------------------------------------------------ repositories

    def _bare(self, repo: Repo) -> Path:
        """The repository's real path, refused outside the allowed local repository roots."""
        bare = bare_repository(repo)
        if self._roots is not None:
            try:
                bare = self._roots.resolve(str(bare))
            except LocalRepoRefused as exc:
                raise GitHostError(str(exc), status=403) from None
        return bare

    def _existing(self, repo: Repo) -> Path:
        bare = self._bare(repo)
        if not _is_git_dir(bare):
            raise GitHostError(f"Repository not found: {bare}", status=404)
        return bare

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
    """Merge the head into the base in a temporary clone (its own fresh config: no merge driver
    or filter the repository's config names), then fetch the merge into the bare repository
    (fast-forward only; a push would run the repository's receive hooks) and return it."""
    number, head, base = record["number"], record["headBranch"], record["baseBranch"]
    with tempfile.TemporaryDirectory(prefix="openagents-merge-") as tmp:
        work = Path(tmp) / "work"
        clone = ("clone", "--quiet", "--template=", "--no-hardlinks", "--branch", base)
        _git(Path(tmp), *clone, str(bare), str(work), trust=(bare,))
        identity = ("-c", f"user.name={MERGER_NAME}", "-c", f"user.email={MERGER_EMAIL}")
        message = f"Merge pull request #{number} from {head}"
        merged = _run_git(work, *identity, "merge", "--no-ff", "--no-edit", "-m", message, head_sha)
        if merged.returncode != 0:
            raise GitHostError(f"Pull request #{number} cannot be merged cleanly", status=409)
        merge_commit = _git(work, "rev-parse", "HEAD")
        refspec = f"refs/heads/{base}:refs/heads/{base}"
        fetch = (
            "fetch",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
        )
        fetched = _run_git(bare, *fetch, str(work), refspec, trust=(work,))
        if fetched.returncode != 0:
            raise GitHostError(
                f"Pull request #{number} could not land: {_last_line(fetched)}", status=409
            )
        return merge_commit


def _check_paths(bare: Path, bundle: Path, scratch: Path) -> None:
    """Refuse (422) a bundle whose pack holds a tree with a forbidden path (``STRICT_PATHS``):
    its pack, indexed strictly into ``scratch`` (its bases from ``bare``), never into ``bare``."""
    data = bundle.read_bytes()
    pack = data[data.find(b"\n\n") + 2 :]  # after the bundle's header (verified already)
    strict = [part for option in STRICT_PATHS for part in ("-c", option)]
    argv = ["git", *hardened(bare), *strict, "index-pack", "--stdin", "--fix-thin", "--strict"]
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        checked = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [*argv, str(scratch)],
            cwd=bare,
            input=pack,
            env={**inherited, "LC_ALL": "C"},
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitHostError(f"git index-pack failed: {type(exc).__name__}") from None
    if checked.returncode != 0:
        lines = checked.stderr.decode(errors="replace").strip().splitlines()
        last = lines[-1] if lines else "git index-pack failed"
        said = next((line for line in lines if line.startswith("error: ")), last)
        raise GitHostError(f"The push is refused: {said.removeprefix('error: ')}", status=422)


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines() or done.stdout.strip().splitlines()
    return lines[-1] if lines else "no output"


def _git(cwd: Path, *args: str, trust: Sequence[Path] = ()) -> str:
    done = _run_git(cwd, *args, trust=trust)
    if done.returncode != 0:
        raise GitHostError(f"git {args[0]} failed: {_last_line(done)}")
    return done.stdout.strip()


_hooks_lock = threading.Lock()
_hooks_dir: list[Path] = []


def empty_hooks_dir() -> Path:
    """A private, empty folder (0700, ours) that ``core.hooksPath`` points at: no hook runs.
    Made again should anything ever appear in it."""
    with _hooks_lock:
        if _hooks_dir:
            folder = _hooks_dir[0]
            try:
                if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
                    return folder
            except OSError:
                pass
            _hooks_dir.clear()
        folder = Path(tempfile.mkdtemp(prefix="openagents-no-hooks-"))
        _hooks_dir.append(folder)
        return folder


def hardened(cwd: Path, trust: Sequence[Path] = ()) -> list[str]:
    """``-c`` options for a git command on host repositories (see ``HARDENED``)."""
    options = [f"core.hooksPath={empty_hooks_dir()}", *HARDENED]
    for folder in (cwd, *trust):
        options += [f"safe.directory={folder}", f"safe.directory={folder}/.git"]
    return [part for option in options for part in ("-c", option)]


def _run_git(cwd: Path, *args: str, trust: Sequence[Path] = ()) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # no GIT_DIR
    env = {**inherited, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        return subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["git", *hardened(cwd, trust), *args],  # noqa: S607 - git from PATH, as everywhere
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


# ---------------------------------------------------------------------- the repository picker

SCAN_DEPTH = 4  # folders below a root a scan descends
SCAN_MAX_REPOSITORIES = 500
SCAN_MAX_FOLDERS = 20_000  # folders a scan visits at most (a root over a huge tree)
SCAN_TTL_SECONDS = 30.0
MAX_HEAD_BYTES = 1024  # a HEAD file read at most (a longer one names no branch)


class LocalCatalog:
    """The git repositories under the allowed roots (``RepositoryCatalog``): a bounded scan
    (``SCAN_DEPTH`` deep, ``SCAN_MAX_REPOSITORIES``, hidden folders skipped, a repository's own
    folders not entered), cached ``SCAN_TTL_SECONDS`` on ``clock``. Only what ``roots`` allows
    is listed; nothing in a repository's config is read (``HEAD`` is read as a file)."""

    def __init__(
        self,
        roots: LocalRepoRoots,
        *,
        clock: Callable[[], float],
        ttl_seconds: float = SCAN_TTL_SECONDS,
    ) -> None:
        self._roots = roots
        self._clock = clock
        self._ttl = ttl_seconds
        self._lock = threading.Lock()
        self._cached: tuple[float, tuple[RepositoryInfo, ...]] | None = None

    def repositories(self, query: str, cursor: str | None) -> RepositoryPage:
        offset = _offset(cursor)
        needle = query.strip().lower()
        found = [repo for repo in self._scan() if needle in repo.repo_url.lower()]
        page = found[offset : offset + PAGE_SIZE]
        more = offset + PAGE_SIZE < len(found)
        return RepositoryPage(tuple(page), f"o{offset + PAGE_SIZE}" if more else None)

    def branches(self, repo_url: str) -> list[BranchInfo]:
        if not repo_url.strip().removeprefix("file://").startswith("/"):
            raise BadRepositoryUrl("repoUrl must be an absolute path on one machine")
        try:
            path = self._roots.repository(repo_url)
        except LocalRepoRefused as exc:
            raise RepositoryMissing(str(exc)) from None
        names = _git(path, "for-each-ref", "--format=%(refname:short)", "refs/heads/")
        return sorted_branches(names.splitlines(), _head_branch(path))

    def _scan(self) -> tuple[RepositoryInfo, ...]:
        with self._lock:
            now = self._clock()
            if self._cached is None or now - self._cached[0] >= self._ttl:
                self._cached = (now, tuple(sorted(self._walk(), key=lambda r: r.repo_url)))
            return self._cached[1]

    def _walk(self) -> list[RepositoryInfo]:
        found: dict[str, RepositoryInfo] = {}
        visited = 0
        queue: list[tuple[Path, int]] = [(Path(root), 0) for root in self._roots.roots]
        while queue and len(found) < SCAN_MAX_REPOSITORIES and visited < SCAN_MAX_FOLDERS:
            folder, depth = queue.pop(0)
            visited += 1
            real = real_path(folder)
            if not self._inside(real):
                continue  # a symlink out of the roots, or into a forbidden folder
            if is_git_repository(real):
                with contextlib.suppress(LocalRepoRefused):  # the check a session create makes
                    found.setdefault(str(self._roots.repository(str(real))), _info(real))
                continue
            if depth >= SCAN_DEPTH:
                continue
            try:
                children = sorted(os.scandir(real), key=lambda entry: entry.name)
            except OSError:
                continue
            queue += [
                (Path(child.path), depth + 1)
                for child in children
                if not child.name.startswith(".") and child.is_dir(follow_symlinks=False)
            ]
        return list(found.values())

    def _inside(self, real: Path) -> bool:
        """Under a root, and not inside a forbidden folder (a root may hold one: the scan
        walks around it)."""
        if any(real.is_relative_to(real_path(folder)) for _, folder in self._roots.forbidden):
            return False
        return any(real.is_relative_to(real_path(root)) for root in self._roots.roots)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if cursor[:1] != "o" or not cursor[1:].isdigit() or len(cursor) > 12:
        raise BadCursor("Not a cursor of this list")
    return int(cursor[1:])


def _head_branch(repo: Path) -> str | None:
    """The branch ``HEAD`` names, read from the file (a detached HEAD: None)."""
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    try:
        with (git_dir / "HEAD").open("rb") as file:
            raw = file.read(MAX_HEAD_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_HEAD_BYTES:
        return None  # no HEAD git wrote: the folder is untrusted, its name would be a guess
    head = raw.decode(errors="replace").strip()
    prefix = "ref: refs/heads/"
    name = head[len(prefix) :] if head.startswith(prefix) else ""
    clean = name.isprintable() and " " not in name and "\ufffd" not in name
    return name if name and clean else None


def _info(repo: Path) -> RepositoryInfo:
    name = repo.name.removesuffix(".git") if repo.name.endswith(".git") else repo.name
    return RepositoryInfo(str(repo), name, None, None, _head_branch(repo))
