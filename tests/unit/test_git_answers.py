"""sandboxd's git answers are checked before the control plane keeps them: a hostile sandbox
cannot hand back a name git would refuse, or anything but a commit id as a commit."""

from __future__ import annotations

import pytest
from openagents.sandbox.git_answers import GitBranch, GitPlace, GitRemote
from openagents.sandbox.port import SandboxError

HEAD = "a" * 40


def test_well_formed_answers_are_kept() -> None:
    assert GitPlace.from_answer({"branch": "agent/x-1", "head": HEAD}) == GitPlace(
        "agent/x-1", HEAD
    )
    assert GitPlace.from_answer({"branch": None, "head": None}) == GitPlace(None, None)
    assert GitPlace.from_answer({"head": "b" * 64}).head == "b" * 64  # a SHA-256 repository
    remote = {"defaultBranch": "main", "originHead": "refs/remotes/origin/main", "upstream": None}
    assert GitRemote.from_answer(remote) == GitRemote("main", "refs/remotes/origin/main", None)


@pytest.mark.parametrize(
    "answer",
    [
        {"branch": "-delete"},
        {"branch": "a..b"},
        {"branch": "with space"},
        {"branch": "new\nline"},
        {"branch": "x" * 256},
        {"branch": 7},
        {"head": "HEAD"},
        {"head": "A" * 40},
        {"head": "a" * 39},
    ],
)
def test_a_malformed_place_is_refused(answer: dict[str, object]) -> None:
    with pytest.raises(SandboxError, match="sandboxd answered an invalid"):
        GitPlace.from_answer(answer)


def test_origin_head_must_name_an_origin_ref() -> None:
    with pytest.raises(SandboxError, match="invalid originHead"):
        GitRemote.from_answer({"originHead": "refs/heads/main"})
    with pytest.raises(SandboxError, match="invalid upstream"):
        GitRemote.from_answer({"upstream": "origin/x;y z"})


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ({"branch": "agent/x-1", "head": HEAD, "detached": False}, "agent/x-1"),
        ({"branch": "main", "head": HEAD, "detached": True}, None),  # detached wins
        ({"branch": "-delete", "head": HEAD}, None),  # a name git refuses is never shown
        ({"branch": "new\nline", "head": HEAD}, None),
        ({"branch": 7, "head": HEAD}, None),
    ],
)
def test_the_shown_branch_is_one_git_allows_or_none(
    answer: dict[str, object], shown: str | None
) -> None:
    assert GitBranch.from_answer(answer) == GitBranch(branch=shown, head=HEAD)


def test_the_shown_branchs_head_is_a_commit_id_or_refused() -> None:
    assert GitBranch.from_answer({"branch": "main", "head": None}).head is None  # no commit yet
    with pytest.raises(SandboxError, match="invalid head"):
        GitBranch.from_answer({"branch": "main", "head": "HEAD"})
