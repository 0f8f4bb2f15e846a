"""sandboxd's answers to the git publishing endpoints (archive, bundle restore, commit,
remote), typed and checked on the control plane's side: a sandbox is hostile, so a name or a
commit id it sends back is refused (``SandboxError``) unless it has the shape git gives it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from openagents.sandbox.errors import SandboxError

COMMIT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
MAX_NAME_CHARS = 255
UNSAFE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")  # what check-ref-format refuses in a ref name


def commit_id(answer: dict[str, Any], name: str) -> str | None:
    value = answer.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not COMMIT_ID.match(value):
        raise SandboxError(f"sandboxd answered an invalid {name}")
    return value


def ref_name(answer: dict[str, Any], name: str, prefix: str = "") -> str | None:
    """A branch or ref name as git allows it (and, when given, below ``prefix``)."""
    value = answer.get(name)
    if value is None:
        return None
    valid = (
        isinstance(value, str)
        and 0 < len(value) <= MAX_NAME_CHARS
        and value.startswith(prefix)
        and not value.startswith("-")
        and ".." not in value
        and not UNSAFE.search(value)
    )
    if not valid:
        raise SandboxError(f"sandboxd answered an invalid {name}")
    return str(value)


@dataclass(frozen=True)
class GitBranch:
    """``GET /git/branch``: the branch HEAD is on, to show and nothing more (what is pushed or
    looked up on the git host is the session's own branch) — None when detached, or when the
    answer names no branch git would allow; and HEAD's commit (None before the first; an id of
    another shape is refused, as in every git answer)."""

    branch: str | None
    head: str | None

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> GitBranch:
        head = commit_id(answer, "head")
        if answer.get("detached"):
            return cls(branch=None, head=head)
        try:
            branch = ref_name(answer, "branch")
        except SandboxError:
            branch = None
        return cls(branch=branch, head=head)


@dataclass(frozen=True)
class GitPlace:
    """Where HEAD is: its branch (None when detached) and commit (None before the first)."""

    branch: str | None
    head: str | None

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> GitPlace:
        return cls(branch=ref_name(answer, "branch"), head=commit_id(answer, "head"))


@dataclass(frozen=True)
class GitRemote:
    """Origin's default branch (``originHead``: ``refs/remotes/origin/<it>``) and the current
    branch's upstream (``origin/<branch>``), each None when the clone does not know it."""

    default_branch: str | None
    origin_head: str | None
    upstream: str | None

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> GitRemote:
        return cls(
            default_branch=ref_name(answer, "defaultBranch"),
            origin_head=ref_name(answer, "originHead", "refs/remotes/origin/"),
            upstream=ref_name(answer, "upstream"),
        )
