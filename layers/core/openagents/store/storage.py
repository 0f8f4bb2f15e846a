"""A user's storage bound, the rule both adapters decide with inside their write: the bytes of
the user's stored messages (their bodies as stored), their live runs' event logs and their
attachments, counted on the user (SQLite: ``profiles.stored_bytes``; DynamoDB: the profile
item's ``storedBytes``) in the same transaction as each write, and given back by deletes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from openagents.domain import errors


class StorageFull(errors.StorageFull):
    """The write would take the user's stored bytes past the limit; nothing was written (the
    domain's error: the API answers 413 ``storage_full`` wherever it comes from)."""

    def __init__(self, used: int, adding: int, limit: int) -> None:
        super().__init__(
            f"Storage full: {used:,} of {limit:,} bytes used, and this needs {adding:,} more."
            " Delete sessions, chats or messages you no longer need (their messages and"
            " attachments go with them) and try again"
        )
        self.used, self.adding, self.limit = used, adding, limit


def admit(used: int, adding: int, limit: int | None) -> None:
    """Refuse (``StorageFull``) a write adding ``adding`` bytes to ``used`` past ``limit``; a
    write that adds nothing (or gives back) always passes."""
    if limit is not None and adding > 0 and used + adding > limit:
        raise StorageFull(used, adding, limit)


def chunk_bytes(chunks: Iterable[Mapping[str, object]]) -> tuple[list[str], int]:
    """The chunks as the event log stores them (compact JSON) and their bytes."""
    texts = [json.dumps(chunk, separators=(",", ":")) for chunk in chunks]
    return texts, sum(len(text.encode()) for text in texts)
