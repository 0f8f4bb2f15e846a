"""Input rules shared by every entry point (pure functions; raise ``InvalidInput``)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from openagents.domain.errors import InvalidInput
from openagents.domain.models import Repo

REPO_PART = re.compile(r"^[.\w-]+$")
SAFE_BRANCH = re.compile(r"^[\w\-/.]+$")
# names git gives its own meaning to: a branch called HEAD makes every later command ambiguous
RESERVED_BRANCHES = frozenset({"HEAD", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD"})
MAX_TITLE_LENGTH = 200
MAX_BRANCH_LENGTH = 200


def repo_part(value: str, *, field: str, what: str) -> str:
    if not REPO_PART.fullmatch(value) or value in {".", ".."}:
        raise InvalidInput(f"Invalid repository {what}", field=field)
    return value


def branch(value: str, *, field: str = "branch") -> str:
    """A branch name git accepts and a shell cannot misread (reference SAFE_BRANCH_PATTERN)."""
    bad = (
        not value
        or len(value) > MAX_BRANCH_LENGTH
        or not SAFE_BRANCH.fullmatch(value)
        or value.startswith(("-", "/", "."))
        or value.endswith(("/", ".", ".lock"))
        or ".." in value
        or "//" in value
        or "/." in value
        or value.split("/")[-1] in RESERVED_BRANCHES
    )
    if bad:
        raise InvalidInput("Invalid branch name", field=field)
    return value


BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _garbles(c: str) -> bool:
    """A control character, a lone surrogate or a bidi override."""
    return unicodedata.category(c) in ("Cc", "Cs") or c in BIDI_CONTROLS


def without_controls(text: str) -> str:
    """``text`` with what ``title`` refuses turned into spaces, then trimmed: for titles
    derived from a message, which cannot be refused."""
    return "".join(" " if _garbles(c) else c for c in text).strip()


def title(value: str, *, field: str = "title") -> str:
    """Trimmed, not blank, bounded, and free of control characters and bidi overrides (which
    would garble or disguise a title in every list that shows it)."""
    value = value.strip()
    if not value:
        raise InvalidInput("Title must not be blank", field=field)
    if any(_garbles(c) for c in value):
        raise InvalidInput("Title must not contain control characters", field=field)
    if len(value) > MAX_TITLE_LENGTH:
        raise InvalidInput(f"Title must be at most {MAX_TITLE_LENGTH} characters", field=field)
    return value


def repository(
    *,
    url: str | None,
    owner: str | None,
    name: str | None,
    field: str,
    allowed_hosts: tuple[str, ...],
    allow_local: bool,
) -> Repo | None:
    """Resolve ``repoUrl`` (or ``cloneUrl``) and/or ``repoOwner``/``repoName`` to one repo.

    Remote repositories must be ``https://`` on an allowed host, with no credentials, port,
    query or fragment (no SSRF through a clone URL). Local paths and ``file://`` URLs are
    accepted only when ``allow_local`` (the one-machine runtime); whether the folder is one a
    session may use (the allowed roots, symlinks resolved) needs the filesystem and is the
    session service's check (``openagents/git/roots.py``).
    """
    if owner is not None:
        repo_part(owner, field="repoOwner", what="owner")
    if name is not None:
        repo_part(name, field="repoName", what="name")
    if url is None:
        if owner is None and name is None:
            return None
        if owner is None or name is None:
            missing = "repoOwner" if owner is None else "repoName"
            raise InvalidInput("repoOwner and repoName go together", field=missing)
        host = allowed_hosts[0]
        return Repo(owner=owner, name=name, clone_url=f"https://{host}/{owner}/{name}.git")
    repo = _parse_url(url, field=field, allowed_hosts=allowed_hosts, allow_local=allow_local)
    if (owner is not None and owner.lower() != (repo.owner or "").lower()) or (
        name is not None and name.lower() != (repo.name or "").lower()
    ):
        raise InvalidInput("Repository URL does not match repoOwner/repoName", field=field)
    return repo


def _parse_url(url: str, *, field: str, allowed_hosts: tuple[str, ...], allow_local: bool) -> Repo:
    if any(unicodedata.category(c) == "Cc" for c in url):  # NUL, newline: before any strip
        raise InvalidInput("Repository URL must not contain control characters", field=field)
    url = url.strip()
    if allow_local and (url.startswith("/") or url.startswith("file://")):
        path = PurePosixPath(url.removeprefix("file://"))
        if not path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
            raise InvalidInput("A local repository must be an absolute path", field=field)
        if path.name.startswith("-"):
            raise InvalidInput("A local repository path must be plain characters", field=field)
        return Repo(owner=None, name=path.name.removesuffix(".git"), clone_url=f"file://{path}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput("Invalid repository URL", field=field) from exc
    host = (parts.hostname or "").lower()
    if (
        parts.scheme != "https"
        or host not in allowed_hosts
        or parts.username is not None
        or parts.password is not None
        or port is not None
        or parts.query
        or parts.fragment
    ):
        hosts = ", ".join(allowed_hosts)
        raise InvalidInput(f"Repository URL must be https:// on one of: {hosts}", field=field)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) != 2:
        raise InvalidInput("Repository URL must name <owner>/<repo>", field=field)
    owner = repo_part(segments[0], field=field, what="owner")
    name = repo_part(segments[1].removesuffix(".git"), field=field, what="name")
    return Repo(owner=owner, name=name, clone_url=f"https://{host}/{owner}/{name}.git")
