"""The workspace root (a real path): path confinement, emptiness, emptying and tallying."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import outside_workspace

# A fresh ext4 volume holds lost+found: it never counts as content.
IGNORED_TOP_LEVEL = frozenset({"lost+found"})


class Workspace:
    """The workspace root (a real path) and the confinement of every path under it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative``; refuses anything that ends up outside the root."""
        if "\x00" in relative or relative.startswith("/"):
            raise outside_workspace(relative)
        if ".." in PurePosixPath(relative).parts:
            raise outside_workspace(relative)
        real = Path(os.path.realpath(self.root / relative))
        if real != self.root and not real.is_relative_to(self.root):
            raise outside_workspace(relative)
        return real

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def is_empty(self) -> bool:
        return not any(entry.name not in IGNORED_TOP_LEVEL for entry in os.scandir(self.root))

    def empty(self) -> None:
        """Delete everything inside the root (the root itself may be a mount point)."""
        for entry in os.scandir(self.root):
            if entry.name in IGNORED_TOP_LEVEL:
                continue
            if entry.is_dir(follow_symlinks=False):
                remove_tree(Path(entry.path))
            else:
                os.unlink(entry.path)

    def tally(self) -> tuple[int, int]:
        """(non-directory entries, bytes of regular files) below the root."""
        count = 0
        total_bytes = 0
        pending = [self.root]
        while pending:
            directory = pending.pop()
            for entry in os.scandir(directory):
                if directory == self.root and entry.name in IGNORED_TOP_LEVEL:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                    continue
                count += 1
                if entry.is_file(follow_symlinks=False):
                    total_bytes += entry.stat(follow_symlinks=False).st_size
        return count, total_bytes


def remove_tree(path: Path) -> None:
    def make_writable_and_retry(func: Callable[..., Any], failed: str, *_: Any) -> None:
        os.chmod(os.path.dirname(failed), 0o700)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, 0o700)
        func(failed)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=make_writable_and_retry)


def normalized(relative: str) -> str:
    return PurePosixPath(relative).as_posix() if relative else "."
