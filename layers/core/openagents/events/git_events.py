"""The events of git work asked for from the app: commit, discard, push, open a pull request."""

from __future__ import annotations

from typing import Literal

from pydantic import MISSING, Field

from openagents.events.envelope import Envelope, Part


class SavedState(Part):
    """The checkpoint a discard saved first."""

    ref: str
    commit: str
    files: int


class GitCommitted(Envelope):
    """Everything in the sandbox was committed on the session's branch through
    `POST /api/sessions/{id}/commit`."""

    type: Literal["git.committed"]
    name: Literal["Git Committed"]
    commit: str = Field(min_length=1, description="The new commit's sha.")
    subject: str = Field(description="Its subject line.")
    branch: str | MISSING = Field(
        default=MISSING, description="The branch the sandbox committed on."
    )
    generated: bool = Field(description="Whether the message was generated through the model port.")


class GitDiscarded(Envelope):
    """The sandbox's uncommitted changes were put back through
    `POST /api/sessions/{id}/discard`, a checkpoint of them saved first."""

    type: Literal["git.discarded"]
    name: Literal["Git Discarded"]
    restored_count: int = Field(ge=0)
    removed_count: int = Field(ge=0)
    restored: list[str] | MISSING = Field(
        default=MISSING, description="At most 100 paths restored."
    )
    removed: list[str] | MISSING = Field(default=MISSING, description="At most 100 paths removed.")
    saved: SavedState = Field(
        description="The checkpoint of what was discarded (revert to it to undo)."
    )


class GitPushed(Envelope):
    """The session's own branch was pushed through the git host by
    `POST /api/sessions/{id}/push`."""

    type: Literal["git.pushed"]
    name: Literal["Git Pushed"]
    branch: str = Field(min_length=1, description="The session's own branch.")
    commit: str = Field(min_length=1, description="Where the branch now points on the git host.")
    base: str | MISSING = Field(default=MISSING, description="The repository's default branch.")


class GitPrOpened(Envelope):
    """`POST /api/sessions/{id}/pr` opened a pull request from the session's own branch (not
    written when an open one was returned)."""

    type: Literal["git.pr_opened"]
    name: Literal["Git PR Opened"]
    pr_number: int = Field(description="The pull request's number.")
    pr_url: str = Field(description="Where a person looks at it.")
    title: str = Field(description="Its title.")


GIT_EVENTS = (GitCommitted, GitDiscarded, GitPushed, GitPrOpened)
