"""``GET /git/diff``: the working tree against the branch's base, untracked files included, with
the bodies of huge and generated files dropped."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .errors import JsonObject
from .git import CHANGE_WORDS, Git
from .process import CHUNK_BYTES
from .workspace import Workspace

if TYPE_CHECKING:
    from .app import App
    from .request import Request


MAX_FILE_DIFF_CHARS = 512 << 10
MAX_TOTAL_DIFF_CHARS = 8 << 20
MAX_UNTRACKED_DIFF_BYTES = 1 << 20
BINARY_SNIFF_BYTES = 8000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


LOCK_FILES = frozenset(
    {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "uv.lock", "poetry.lock", "Cargo.lock"}
)


DIFF_STATUS_ORDER = {"modified": 0, "added": 1, "renamed": 2, "deleted": 3}


@dataclass
class DiffFile:
    path: str
    status: str
    additions: int = 0
    deletions: int = 0
    diff: str | None = None
    old_path: str | None = None

    def to_json(self) -> JsonObject:
        return {
            "path": self.path,
            "oldPath": self.old_path,
            "status": self.status,
            "additions": self.additions,
            "deletions": self.deletions,
            "diff": self.diff,
        }


def git_diff(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    base, base_ref = diff_base(git)
    files = tracked_changes(git, base or EMPTY_TREE)
    files += [untracked_change(app.workspace, path) for path in untracked_paths(git)]
    files.sort(key=lambda item: (DIFF_STATUS_ORDER.get(item.status, 9), item.path))
    limit_diff_bodies(files)
    return {
        "base": base,
        "baseRef": base_ref,
        "files": [item.to_json() for item in files],
        "totalAdditions": sum(item.additions for item in files),
        "totalDeletions": sum(item.deletions for item in files),
    }


def diff_base(git: Git) -> tuple[str | None, str | None]:
    """(commit, label): merge-base with origin's default branch, else HEAD, else nothing."""
    head = git.head()
    if head is None:
        return None, None
    default_ref = git.default_remote_ref()
    if default_ref is not None:
        merge_base = git.maybe("merge-base", default_ref, "HEAD")
        if merge_base is not None:
            return merge_base, default_ref.removeprefix("refs/remotes/")
    return head, "HEAD"


DIFF_OPTIONS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")


def tracked_changes(git: Git, base: str) -> list[DiffFile]:
    files = parse_name_status(git.output("diff", *DIFF_OPTIONS, "--name-status", "-z", base))
    counts = parse_numstat(git.output("diff", *DIFF_OPTIONS, "--numstat", "-z", base))
    patch = git.output("diff", *DIFF_OPTIONS, "--src-prefix=a/", "--dst-prefix=b/", base)
    patches = split_patch(patch.decode("utf-8", "replace"))
    if len(patches) != len(files) or len(counts) != len(files):
        return [file_change(git, base, item) for item in files]  # e.g. unmerged paths
    for item, (additions, deletions), body in zip(files, counts, patches, strict=True):
        item.additions, item.deletions = additions, deletions
        item.diff = None if is_generated(item.path) else body
    return files


def file_change(git: Git, base: str, item: DiffFile) -> DiffFile:
    """One file's counts and patch, asked for on its own."""
    paths = [item.old_path, item.path] if item.old_path else [item.path]
    counts = parse_numstat(git.output("diff", *DIFF_OPTIONS, "--numstat", "-z", base, "--", *paths))
    item.additions, item.deletions = counts[0] if counts else (0, 0)
    if not is_generated(item.path):
        patch = git.output(
            "diff", *DIFF_OPTIONS, "--src-prefix=a/", "--dst-prefix=b/", base, "--", *paths
        )
        item.diff = patch.decode("utf-8", "replace") or None
    return item


def parse_name_status(raw: bytes) -> list[DiffFile]:
    tokens = iter(raw.decode("utf-8", "replace").split("\x00"))
    files: list[DiffFile] = []
    for code in tokens:
        if not code:
            continue
        if code[0] in "RC":
            old_path, new_path = next(tokens), next(tokens)
            status = "renamed" if code[0] == "R" else "added"
            files.append(
                DiffFile(new_path, status, old_path=old_path if status == "renamed" else None)
            )
        else:
            files.append(DiffFile(next(tokens), CHANGE_WORDS.get(code[0], "modified")))
    return files


def parse_numstat(raw: bytes) -> list[tuple[int, int]]:
    tokens = iter(raw.decode("utf-8", "replace").split("\x00"))
    counts: list[tuple[int, int]] = []
    for record in tokens:
        if not record:
            continue
        additions, deletions, path = record.split("\t", 2)
        if not path:  # a rename: the old and new paths follow as their own records
            next(tokens)
            next(tokens)
        counts.append((to_count(additions), to_count(deletions)))
    return counts


def to_count(value: str) -> int:
    return int(value) if value.isdigit() else 0  # "-" for binary files


def split_patch(patch: str) -> list[str]:
    return [chunk for chunk in re.split(r"(?m)^(?=diff --git )", patch) if chunk]


def is_generated(path: str) -> bool:
    name = PurePosixPath(path).name
    return name in LOCK_FILES or name.endswith(".min.js")


def untracked_paths(git: Git) -> list[str]:
    raw = git.output("ls-files", "--others", "--exclude-standard", "-z")
    paths = raw.decode("utf-8", "replace").split("\x00")
    return [path for path in paths if path and not path.endswith("/")]


def untracked_change(workspace: Workspace, relative: str) -> DiffFile:
    path = workspace.root / relative
    item = DiffFile(relative, "added")
    if path.is_symlink() or not path.is_file():
        item.additions = 1
        return item
    size = path.stat().st_size
    with open(path, "rb") as handle:
        data = handle.read(MAX_UNTRACKED_DIFF_BYTES)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        item.diff = f"{diff_header(relative)}Binary files /dev/null and b/{relative} differ\n"
        return item
    if size > len(data):
        item.additions = count_lines(path)
        return item
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    item.additions = len(lines)
    if not is_generated(relative):
        item.diff = new_file_patch(relative, lines, os.access(path, os.X_OK))
    return item


def count_lines(path: Path) -> int:
    lines = 0
    last = b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def diff_header(relative: str) -> str:
    return f"diff --git a/{relative} b/{relative}\n"


def new_file_patch(relative: str, lines: list[str], executable: bool) -> str:
    mode = "100755" if executable else "100644"
    header = f"{diff_header(relative)}new file mode {mode}\n"
    if not lines:
        return header
    span = "1" if len(lines) == 1 else f"1,{len(lines)}"
    body = "".join(f"+{line}" for line in lines)
    if not body.endswith("\n"):
        body += "\n\\ No newline at end of file\n"
    return f"{header}--- /dev/null\n+++ b/{relative}\n@@ -0,0 +{span} @@\n{body}"


def limit_diff_bodies(files: list[DiffFile]) -> None:
    """Huge bodies are dropped (counts stay) so one response cannot grow without bound."""
    budget = MAX_TOTAL_DIFF_CHARS
    for item in files:
        if item.diff is None:
            continue
        if len(item.diff) > MAX_FILE_DIFF_CHARS or len(item.diff) > budget:
            item.diff = None
            continue
        budget -= len(item.diff)
