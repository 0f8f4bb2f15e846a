"""Where a local repository may live (the one-machine runtime).

A session's ``repoUrl`` may name a local repository only when its real path (every symlink
resolved) lies under one of the allowed roots (``OPENAGENTS_LOCAL_REPO_ROOTS``), and neither is
nor contains the state folder (``OPENAGENTS_HOME``: secrets, other sessions' workspaces) or the
server's own checkout. The check runs when the session is created and again before anything on
the host touches the path (the sandbox's read-only bind, the git host's fetches and merges), so
a path that later became a symlink elsewhere is refused too.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SETTING = "OPENAGENTS_LOCAL_REPO_ROOTS"


class LocalRepoRefused(Exception):
    """The path is no allowed local repository; the message says why and names the setting."""


def real_path(path: Path | str) -> Path:
    """``path`` with every symlink resolved (missing trailing parts are kept as given)."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


@functools.cache
def server_checkout() -> Path:
    """The folder holding the running ``openagents`` package's repository: the nearest parent
    with a ``.git`` entry (no git command runs: its config is not ours to trust), else the
    package folder itself (an installed wheel)."""
    package = real_path(Path(__file__).parent.parent)
    for folder in package.parents:
        if (folder / ".git").exists():
            return folder
    return package


@dataclass(frozen=True)
class LocalRepoRoots:
    roots: tuple[Path, ...]  # as configured
    forbidden: tuple[
        tuple[str, Path], ...
    ]  # (what it is, path): never a repository, never inside one

    def resolve(self, clone_url: str) -> Path:
        """The real path of a local repository (``file://`` URL or absolute path), or
        ``LocalRepoRefused``."""
        given = clone_url.strip().removeprefix("file://")
        if not given.startswith("/"):
            raise LocalRepoRefused("A local repository must be an absolute path")
        real = real_path(given)
        for what, folder in self.forbidden:
            folder = real_path(folder)
            if real.is_relative_to(folder) or folder.is_relative_to(real):
                raise LocalRepoRefused(
                    f"A local repository may not be or contain {what} ({folder})"
                )
        allowed = [real_path(root) for root in self.roots]
        if not any(real.is_relative_to(root) for root in allowed):
            where = ", ".join(str(root) for root in allowed) or "none configured"
            raise LocalRepoRefused(
                f"A local repository must lie under {SETTING} ({where}); {real} does not"
            )
        return real

    def repository(self, clone_url: str) -> Path:
        """``resolve``, and the folder must exist and be a git repository (bare or not): a
        session is refused up front rather than failing at its first clone."""
        real = self.resolve(clone_url)
        if not real.is_dir():
            raise LocalRepoRefused(f"No local repository at {real}: the folder does not exist")
        if not is_git_repository(real):
            raise LocalRepoRefused(f"{real} is not a git repository")
        return real


def is_git_repository(folder: Path) -> bool:
    """A bare repository (``HEAD``, ``objects/``, ``refs/``) or a work tree with ``.git``
    (a folder like that, or a ``gitdir:`` file). Read from the layout: no git command runs,
    so nothing in the folder's config is trusted."""
    dot_git = folder / ".git"
    if dot_git.is_file():
        with dot_git.open("rb") as link:
            return link.read(7) == b"gitdir:"
    candidate = dot_git if dot_git.is_dir() else folder
    return (
        (candidate / "HEAD").is_file()
        and (candidate / "objects").is_dir()
        and (candidate / "refs").is_dir()
    )


def local_repo_roots(roots: Iterable[Path], state_dir: Path) -> LocalRepoRoots:
    """The policy for these roots: the state folder and the server's checkout are refused."""
    return LocalRepoRoots(
        roots=tuple(roots),
        forbidden=(
            ("the state folder (OPENAGENTS_HOME)", Path(state_dir).absolute()),
            ("the server's own checkout", server_checkout()),
        ),
    )
