"""Input rules: repositories (no SSRF through a clone URL), branches, titles."""

from __future__ import annotations

import pytest
from openagents.domain import validation
from openagents.domain.errors import InvalidInput
from openagents.domain.models import Repo

HOSTS = ("github.com",)


def repo(
    url: str | None = None,
    owner: str | None = None,
    name: str | None = None,
    *,
    allow_local: bool = False,
    hosts: tuple[str, ...] = HOSTS,
) -> Repo | None:
    return validation.repository(
        url=url,
        owner=owner,
        name=name,
        field="repoUrl",
        allowed_hosts=hosts,
        allow_local=allow_local,
    )


def rejected(
    url: str | None = None,
    owner: str | None = None,
    name: str | None = None,
    *,
    allow_local: bool = False,
) -> str | None:
    with pytest.raises(InvalidInput) as info:
        repo(url, owner, name, allow_local=allow_local)
    return info.value.field


# --------------------------------------------------------------- repository


def test_no_repository_at_all() -> None:
    assert repo() is None


@pytest.mark.parametrize(
    ("url", "owner", "name", "clone"),
    [
        ("https://github.com/vercel/open-agents", "vercel", "open-agents", None),
        ("https://github.com/vercel/open-agents.git", "vercel", "open-agents", None),
        ("https://github.com/vercel/open-agents/", "vercel", "open-agents", None),
        ("  https://github.com/o/r  ", "o", "r", None),
        (
            "https://GitHub.COM/Owner/Repo.js",
            "Owner",
            "Repo.js",
            "https://github.com/Owner/Repo.js.git",
        ),
    ],
)
def test_https_urls_on_allowed_hosts(url: str, owner: str, name: str, clone: str | None) -> None:
    result = repo(url)
    assert result is not None
    assert (result.owner, result.name) == (owner, name)
    assert result.clone_url == (clone or f"https://github.com/{owner}/{name}.git")


def test_owner_and_name_without_url_build_the_clone_url() -> None:
    result = repo(None, "vercel", "open-agents")
    assert result == Repo(
        owner="vercel", name="open-agents", clone_url="https://github.com/vercel/open-agents.git"
    )


def test_owner_and_name_use_the_first_allowed_host() -> None:
    result = repo(None, "o", "r", hosts=("git.example.com", "github.com"))
    assert result is not None
    assert result.clone_url == "https://git.example.com/o/r.git"


def test_url_matching_owner_and_name_case_insensitively() -> None:
    result = repo("https://github.com/Vercel/Open-Agents", "vercel", "open-agents")
    assert result is not None
    assert result.owner == "Vercel"


@pytest.mark.parametrize(
    ("owner", "name", "field"),
    [("vercel", None, "repoName"), (None, "open-agents", "repoOwner")],
)
def test_owner_and_name_go_together(owner: str | None, name: str | None, field: str) -> None:
    assert rejected(None, owner, name) == field


@pytest.mark.parametrize(
    ("owner", "name", "field"),
    [
        ("a b", "r", "repoOwner"),
        ("..", "r", "repoOwner"),
        (".", "r", "repoOwner"),
        ("o", "r/x", "repoName"),
        ("o", "..", "repoName"),
        ("o", "", "repoName"),
        ("o;rm", "r", "repoOwner"),
        ("o", "r$(id)", "repoName"),
    ],
)
def test_bad_owner_or_name(owner: str, name: str, field: str) -> None:
    assert rejected(None, owner, name) == field


def test_url_not_matching_owner_or_name() -> None:
    assert rejected("https://github.com/o/r", "other", "r") == "repoUrl"
    assert rejected("https://github.com/o/r", "o", "other") == "repoUrl"


@pytest.mark.parametrize(
    "url",
    [
        "http://github.com/o/r",  # not https
        "ssh://git@github.com/o/r",
        "git@github.com:o/r.git",
        "ftp://github.com/o/r",
        "https://gitlab.com/o/r",  # host not allowed
        "https://github.com.evil.com/o/r",
        "https://evilgithub.com/o/r",
        "https://github.com@evil.com/o/r",  # userinfo trick: the host is evil.com
        "https://user:pass@github.com/o/r",  # credentials
        "https://token@github.com/o/r",
        "https://github.com:443/o/r",  # explicit port
        "https://github.com:22/o/r",
        "https://github.com:abc/o/r",  # invalid port
        "https://169.254.169.254/latest/meta-data",  # metadata endpoint
        "https://127.0.0.1/o/r",
        "https://localhost/o/r",
        "https://[::1]/o/r",
        "https://github.com/o/r?ref=main",  # query
        "https://github.com/o/r#frag",  # fragment
        "https://github.com/o",  # not owner/repo
        "https://github.com/o/r/tree/main",
        "https://github.com/",
        "https://github.com/../r",
        "https://github.com/o/..",
        "https://github.com/o/r%2F..",
        "https://github.com/o/r x",
        "file:///etc/passwd",  # local paths need allow_local
        "/srv/repos/project",
        "",
        "not a url",
    ],
)
def test_remote_url_rejected(url: str) -> None:
    assert rejected(url) == "repoUrl"


def test_field_name_is_the_callers() -> None:
    with pytest.raises(InvalidInput) as info:
        validation.repository(
            url="http://github.com/o/r",
            owner=None,
            name=None,
            field="cloneUrl",
            allowed_hosts=HOSTS,
            allow_local=False,
        )
    assert info.value.field == "cloneUrl"


@pytest.mark.parametrize(
    ("url", "name", "clone"),
    [
        ("/srv/repos/project", "project", "file:///srv/repos/project"),
        ("/srv/repos/project.git", "project", "file:///srv/repos/project.git"),
        ("file:///home/me/code/app", "app", "file:///home/me/code/app"),
    ],
)
def test_local_paths_when_allowed(url: str, name: str, clone: str) -> None:
    result = repo(url, allow_local=True)
    assert result == Repo(owner=None, name=name, clone_url=clone)


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "file:///",
        "file://relative/path",
        "/srv/../etc/passwd",
        "file:///srv/x/../../etc",
        "/srv/repos/app\n--upload-pack=touch x",
        "/srv/repos/a\x00b",
        "/srv/repos/-oops",
    ],
)
def test_bad_local_paths_rejected(url: str) -> None:
    assert rejected(url, allow_local=True) == "repoUrl"


def test_remote_rules_still_apply_when_local_is_allowed() -> None:
    assert rejected("https://evil.com/o/r", allow_local=True) == "repoUrl"
    assert rejected("relative/path", allow_local=True) == "repoUrl"


# ------------------------------------------------------------------- branch


@pytest.mark.parametrize(
    "value",
    ["main", "feature/x-1", "na/3c8d3518", "release/v1.2.3", "a_b", "x" * 200, "a/b/c"],
)
def test_valid_branches(value: str) -> None:
    assert validation.branch(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "-rf",
        "/abs",
        ".hidden",
        "trailing/",
        "trailing.",
        "x.lock",
        "a..b",
        "a//b",
        "a/.b",
        "a b",
        "a;rm -rf /",
        "$(id)",
        "`id`",
        "a|b",
        "a~1",
        "a^1",
        "a:b",
        "a\\b",
        "a\nb",
        "x" * 201,
    ],
)
def test_invalid_branches(value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validation.branch(value)
    assert info.value.field == "branch"
    assert info.value.message == "Invalid branch name"


def test_branch_field_can_be_named() -> None:
    with pytest.raises(InvalidInput) as info:
        validation.branch("..", field="baseBranch")
    assert info.value.field == "baseBranch"


# -------------------------------------------------------------------- title


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Hello", "Hello"), ("  Hello  ", "Hello"), ("t" * 200, "t" * 200), (" a b ", "a b")],
)
def test_valid_titles(value: str, expected: str) -> None:
    assert validation.title(value) == expected


@pytest.mark.parametrize("value", ["", "   ", "\n\t", "t" * 201, "  " + "t" * 201])
def test_invalid_titles(value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validation.title(value)
    assert info.value.field == "title"


def test_title_field_can_be_named() -> None:
    with pytest.raises(InvalidInput) as info:
        validation.title(" ", field="name")
    assert info.value.field == "name"
