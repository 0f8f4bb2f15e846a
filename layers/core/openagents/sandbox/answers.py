"""sandboxd's answers (``sandbox/README.md``), typed and checked once in the client: a sandbox
is hostile, so a field of the wrong type is refused (``SandboxError``) before anything believes
it. Only the fields the control plane reads are typed; what is stored as sandboxd gave it (a
snapshot's manifest) keeps the answer too (``as_json``), so stored formats stay as they were.
An exec's result is the one answer read leniently (``ExecResult``): it is the command's word,
shown as it came, so a field of the wrong type reads as absent instead."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from openagents.domain.checkpoints import Checkpoint
from openagents.sandbox.errors import SandboxError
from openagents.sandbox.git_answers import commit_id, ref_name

Answer = Mapping[str, object]  # one decoded JSON object, as sandboxd sent it
T = TypeVar("T", str, int, bool)


def _field(answer: Answer, name: str, kind: type[T], what: str) -> T | None:
    """``answer[name]`` when it is a ``kind`` (a bool is no int here), None when absent."""
    value = answer.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SandboxError(f"sandboxd answered an invalid {name} ({what})")
    return value


def _lenient(answer: Answer, name: str, kind: type[T]) -> T | None:
    """``answer[name]`` when it is a ``kind`` (a bool is no int here), else None."""
    value = answer.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return None
    return value


@dataclass(frozen=True)
class Health:
    """``GET /health``."""

    ok: bool
    version: int | None
    workspace: str | None

    @classmethod
    def from_answer(cls, answer: Answer) -> Health:
        return cls(
            ok=_field(answer, "ok", bool, "health") is True,
            version=_field(answer, "version", int, "health"),
            workspace=_field(answer, "workspace", str, "health"),
        )


@dataclass(frozen=True)
class ExecResult:
    """``POST /exec`` (a streamed exec's last frame too): the command's exit code (None: it
    timed out, or was interrupted), its output as sandboxd capped it, and ``interrupted`` for a
    keyed command that died with its sandbox (it may have run part)."""

    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False
    duration_ms: int = 0
    interrupted: bool = False

    @classmethod
    def from_answer(cls, answer: Answer) -> ExecResult:
        return cls(
            exit_code=_lenient(answer, "exitCode", int),
            stdout=_lenient(answer, "stdout", str) or "",
            stderr=_lenient(answer, "stderr", str) or "",
            truncated=answer.get("truncated") is True,
            timed_out=answer.get("timedOut") is True,
            duration_ms=_lenient(answer, "durationMs", int) or 0,
            interrupted=answer.get("interrupted") is True,
        )


@dataclass(frozen=True)
class Synced:
    """``POST /sync``: the page cache is flushed (before an EBS snapshot)."""

    ok: bool

    @classmethod
    def from_answer(cls, answer: Answer) -> Synced:
        return cls(ok=_field(answer, "ok", bool, "sync") is True)

    def as_json(self) -> dict[str, object]:
        return {"ok": self.ok}


@dataclass(frozen=True)
class SnapshotManifest:
    """``GET /snapshots/<id>/manifest``: what an archive holds and its checksum (``error`` and
    no ``sha256`` when the archive broke)."""

    id: str | None
    sha256: str | None
    archive_bytes: int | None
    file_count: int | None
    bytes: int | None
    git_head: str | None
    error: str | None
    answer: Answer = field(default_factory=dict, repr=False, compare=False)  # as sent

    @classmethod
    def from_answer(cls, answer: Answer) -> SnapshotManifest:
        what = "snapshot manifest"
        return cls(
            id=_field(answer, "id", str, what),
            sha256=_field(answer, "sha256", str, what),
            archive_bytes=_field(answer, "archiveBytes", int, what),
            file_count=_field(answer, "fileCount", int, what),
            bytes=_field(answer, "bytes", int, what),
            git_head=_field(answer, "gitHead", str, what),
            error=_field(answer, "error", str, what),
            answer=dict(answer),
        )

    def as_json(self) -> dict[str, object]:
        """The manifest as sandboxd gave it (what a ``SnapshotRef`` stores)."""
        return dict(self.answer)


@dataclass(frozen=True)
class Restored:
    """``POST /restore``: what the archive unpacked into the empty workspace."""

    file_count: int | None
    bytes: int | None
    sha256: str | None
    git_head: str | None

    @classmethod
    def from_answer(cls, answer: Answer) -> Restored:
        what = "restore"
        return cls(
            file_count=_field(answer, "fileCount", int, what),
            bytes=_field(answer, "bytes", int, what),
            sha256=_field(answer, "sha256", str, what),
            git_head=_field(answer, "gitHead", str, what),
        )


def _checkpoint(answer: Answer, what: str) -> Checkpoint:
    if not isinstance(answer.get("ref"), str) or not isinstance(answer.get("commit"), str):
        raise SandboxError(f"sandboxd answered an invalid {what}")
    return Checkpoint.from_json(answer)


def checkpoint(answer: Answer) -> Checkpoint:
    """``POST /git/checkpoint``: the ref, its commit and how many files it holds."""
    return _checkpoint(answer, "checkpoint")


@dataclass(frozen=True)
class Reverted:
    """``POST /git/revert``: the files written back and removed, and the state the revert
    replaced (``saved``; None for a dry run)."""

    dry_run: bool
    restored: tuple[str, ...]
    removed: tuple[str, ...]
    saved: Checkpoint | None

    @classmethod
    def from_answer(cls, answer: Answer) -> Reverted:
        saved = answer.get("saved")
        return cls(
            dry_run=answer.get("dryRun") is True,
            restored=_paths(answer, "restored"),
            removed=_paths(answer, "removed"),
            saved=_checkpoint(saved, "revert") if isinstance(saved, Mapping) else None,
        )


def _paths(answer: Answer, name: str) -> tuple[str, ...]:
    value = answer.get(name) or []
    if not isinstance(value, list):
        raise SandboxError(f"sandboxd answered an invalid {name}")
    return tuple(str(path) for path in value)


@dataclass(frozen=True)
class PreparedWorkspace:
    """``POST /workspace/prepare``: the branch checked out (None: the default one kept), HEAD
    (None before the first commit) and origin's default branch, each as git allows them."""

    branch: str | None
    head: str | None
    default_branch: str | None

    @classmethod
    def from_answer(cls, answer: Answer) -> PreparedWorkspace:
        place = dict(answer)
        return cls(
            branch=ref_name(place, "branch"),
            head=commit_id(place, "head"),
            default_branch=ref_name(place, "defaultBranch"),
        )


@dataclass(frozen=True)
class UncommittedFile:
    path: str
    status: str  # modified, added, deleted, renamed, copied, conflicted or untracked


@dataclass(frozen=True)
class GitStatus:
    """``GET /git/status`` (git's porcelain v2, counted by sandboxd): the sandbox's word, shown
    and used to decide what to commit, never where to push."""

    branch: str | None
    is_detached_head: bool
    has_uncommitted_changes: bool
    has_unpushed_commits: bool
    staged_count: int
    unstaged_count: int
    untracked_count: int
    ahead: int
    behind: int
    uncommitted_files: tuple[UncommittedFile, ...]

    @classmethod
    def from_answer(cls, answer: Answer) -> GitStatus:
        what = "git status"

        def flag(name: str) -> bool:
            return _field(answer, name, bool, what) is True

        def count(name: str) -> int:
            return _field(answer, name, int, what) or 0

        return cls(
            branch=_field(answer, "branch", str, what),
            is_detached_head=flag("isDetachedHead"),
            has_uncommitted_changes=flag("hasUncommittedChanges"),
            has_unpushed_commits=flag("hasUnpushedCommits"),
            staged_count=count("stagedCount"),
            unstaged_count=count("unstagedCount"),
            untracked_count=count("untrackedCount"),
            ahead=count("ahead"),
            behind=count("behind"),
            uncommitted_files=tuple(
                UncommittedFile(
                    path=_field(entry, "path", str, what) or "",
                    status=_field(entry, "status", str, what) or "",
                )
                for entry in _objects(answer, "uncommittedFiles")
            ),
        )


def _objects(answer: Answer, name: str) -> list[Answer]:
    """``answer[name]``: a list of JSON objects (empty when absent)."""
    value = answer.get(name) or []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise SandboxError(f"sandboxd answered an invalid {name}")
    return value


@dataclass(frozen=True)
class DiffFile:
    path: str
    old_path: str | None  # a rename's source
    status: str  # modified, added, renamed or deleted
    additions: int
    deletions: int
    diff: str | None  # None: a lock or generated file, or a patch past sandboxd's caps


@dataclass(frozen=True)
class GitDiff:
    """``GET /git/diff``: the working tree against the merge base with origin's default branch
    (``base``; None with no commit), file by file."""

    base: str | None
    base_ref: str | None
    files: tuple[DiffFile, ...]
    total_additions: int
    total_deletions: int

    @classmethod
    def from_answer(cls, answer: Answer) -> GitDiff:
        what = "git diff"
        return cls(
            base=_field(answer, "base", str, what),
            base_ref=_field(answer, "baseRef", str, what),
            files=tuple(
                DiffFile(
                    path=_field(entry, "path", str, what) or "",
                    old_path=_field(entry, "oldPath", str, what),
                    status=_field(entry, "status", str, what) or "",
                    additions=_field(entry, "additions", int, what) or 0,
                    deletions=_field(entry, "deletions", int, what) or 0,
                    diff=_field(entry, "diff", str, what),
                )
                for entry in _objects(answer, "files")
            ),
            total_additions=_field(answer, "totalAdditions", int, what) or 0,
            total_deletions=_field(answer, "totalDeletions", int, what) or 0,
        )

    def to_json(self) -> dict[str, object]:
        """The answer as sandboxd writes it (``sandbox/sandboxd/diff.py``): the cached diff."""
        return {
            "base": self.base,
            "baseRef": self.base_ref,
            "files": [
                {
                    "path": f.path,
                    "oldPath": f.old_path,
                    "status": f.status,
                    "additions": f.additions,
                    "deletions": f.deletions,
                    "diff": f.diff,
                }
                for f in self.files
            ],
            "totalAdditions": self.total_additions,
            "totalDeletions": self.total_deletions,
        }


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the workspace root
    type: str  # file, dir or symlink
    size: int  # a symlink's: the length of its target


@dataclass(frozen=True)
class FileList:
    """``GET /files``: a depth-first listing, sorted; ``truncated`` past 10,000 entries."""

    entries: tuple[FileEntry, ...]
    truncated: bool

    @classmethod
    def from_answer(cls, answer: Answer) -> FileList:
        what = "file listing"
        return cls(
            entries=tuple(
                FileEntry(
                    path=_field(entry, "path", str, what) or "",
                    type=_field(entry, "type", str, what) or "",
                    size=_field(entry, "size", int, what) or 0,
                )
                for entry in _objects(answer, "entries")
            ),
            truncated=_field(answer, "truncated", bool, what) is True,
        )


@dataclass(frozen=True)
class FileContent:
    """``GET /files/content``: text (``utf-8``) or ``base64``; ``size`` is the whole file's,
    ``truncated`` when it is more than was asked for."""

    path: str
    content: str
    encoding: str
    size: int
    truncated: bool

    @classmethod
    def from_answer(cls, answer: Answer) -> FileContent:
        what = "file content"
        return cls(
            path=_field(answer, "path", str, what) or "",
            content=_field(answer, "content", str, what) or "",
            encoding=_field(answer, "encoding", str, what) or "utf-8",
            size=_field(answer, "size", int, what) or 0,
            truncated=_field(answer, "truncated", bool, what) is True,
        )


@dataclass(frozen=True)
class FileWritten:
    """``PUT /files/content``."""

    path: str
    size: int

    @classmethod
    def from_answer(cls, answer: Answer) -> FileWritten:
        what = "file write"
        return cls(
            path=_field(answer, "path", str, what) or "",
            size=_field(answer, "size", int, what) or 0,
        )
