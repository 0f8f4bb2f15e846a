"""Turn checkpoints: before a run's first tool step the whole workspace is saved as a commit on a
hidden ref in the sandbox (``refs/openagents/checkpoints/<runId>``); a revert puts the workspace
back as it was then, after saving the state it replaces on a ref of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from openagents.domain.errors import Conflict

CHECKPOINT_REFS = "refs/openagents/checkpoints/"


def checkpoint_ref(name: str) -> str:
    """The hidden ref of a run's checkpoint (``name``: the run id) or of a revert's save."""
    return CHECKPOINT_REFS + name


class NoCheckpoint(Conflict):
    """The run has no checkpoint to go back to (it ran no tool), or the sandbox lost it."""

    code = "no_checkpoint"


@dataclass(frozen=True)
class Checkpoint:
    ref: str
    commit: str
    files: int  # files in the checkpoint (tracked and untracked, ignored ones excluded)

    def to_json(self) -> dict[str, str | int]:
        return {"ref": self.ref, "commit": self.commit, "files": self.files}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Checkpoint:
        return cls(str(data["ref"]), str(data["commit"]), int(str(data.get("files", 0))))


@dataclass(frozen=True)
class RevertRecord:
    """A revert to before a run, kept on that run (the chat shows "Reverted to before this
    turn" there). ``saved`` is the state the revert replaced: reverting to it undoes it."""

    id: str
    at: datetime
    user_id: str
    restored: int
    removed: int
    saved: Checkpoint

    def to_json(self) -> dict[str, str | int | dict[str, str | int]]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "userId": self.user_id,
            "restored": self.restored,
            "removed": self.removed,
            "saved": self.saved.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RevertRecord:
        saved = data["saved"]
        if not isinstance(saved, Mapping):
            raise ValueError("a revert record keeps the state it replaced")
        return cls(
            id=str(data["id"]),
            at=datetime.fromisoformat(str(data["at"])),
            user_id=str(data["userId"]),
            restored=int(str(data.get("restored", 0))),
            removed=int(str(data.get("removed", 0))),
            saved=Checkpoint.from_json(saved),
        )
