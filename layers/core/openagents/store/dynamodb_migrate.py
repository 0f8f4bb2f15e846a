"""The DynamoDB key-layout migration of "ids per user" (chat and message ids unique per user):
a table written before it keeps these items under old keys, invisible to the adapter.

| item | old pk / sk | new pk / sk |
|---|---|---|
| chat id claim | ``CID#<chatId>`` / ``CID`` | ``CID#<userId, %-escaped>#<chatId>`` / ``CID`` |
| message id claim | ``MID#<messageId>`` / ``MID`` | ``MID#<userId, %-escaped>#<messageId>`` |
| message | ``C#<chatId>`` / ``M#…`` | ``C#<sessionId>#<chatId>`` / ``M#…`` |
| run claim | ``RCHAT#<chatId>`` / ``CLAIM`` | ``RCHAT#<sessionId>#<chatId>`` / ``CLAIM`` |
| message → run | ``RMSG#<chatId>#<messageId>`` | ``RMSG#<sessionId>#<chatId>#<messageId>`` |
| chat tombstone | ``PURGE``/``C#<chatId>`` | ``PURGE``/``C#<sessionId>#<chatId>`` (``chatIds``) |

Tombstones gain ``userId`` (whose claims the reconciler frees; until then it leaves them).
Sessions, chats, audit entries, share links, runs, live marks and stream events kept their keys.

It is driven from what is unambiguous: the sessions (their items carry ``userId``) and the
sessions tombstones name; their chats (chat items, tombstones, runs); per chat the old keys
(old chat and session ids hold no ``#``; message ids may, so they come from the old message
partition's items and the session's runs, never from parsing a key). Every item is copied to its
new key first (a conditional put: an item live traffic already wrote there is kept), and the
old one deleted after, the chat id claim last: a crash in between re-runs cleanly, and a second
run finds nothing and changes nothing. A deleted session's user may be unknown (no session item,
no run): its old claims are then deleted (no chat can be made in a deleted session).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError

from openagents.store.keys import (
    CHAT_PREFIX,
    MESSAGE_PREFIX,
    PURGE_PK,
    SESSION_PREFIX,
    SESSION_SK,
    Key,
    chat_claim_key,
    chat_tombstone_key,
    message_claim_key,
    message_run_key,
    messages_pk,
    run_claim_key,
    run_key,
    session_pk,
    session_runs_pk,
    session_tombstone_key,
)
from openagents.store.runs import Run, run_from_json

__all__ = ["MigrationReport", "migrate_table"]
# a deleted session's tombstone whose user nobody knows (its old claims deleted, none under new
# keys to free); not empty: ``userId`` keys an index. Its claims the reconciler would free are
# conditioned on the session, so even a user of this name loses nothing.
UNKNOWN_USER = "#unknown"
Raw = dict[str, Any]  # one item as the DynamoDB API has it ({"pk": {"S": …}, …})
Move = tuple[str, Raw, Key | None]  # kind, old item, new key (None: delete only)


# the old layout's keys (chat and session ids hold no ``#``; message ids may)
def old_chat_claim_key(chat_id: str) -> Key:
    return f"CID#{chat_id}", "CID"


def old_message_claim_key(message_id: str) -> Key:
    return f"MID#{message_id}", "MID"


def old_messages_pk(chat_id: str) -> str:
    return f"{CHAT_PREFIX}{chat_id}"


def old_run_claim_key(chat_id: str) -> Key:
    return f"RCHAT#{chat_id}", "CLAIM"


def old_message_run_key(chat_id: str, message_id: str) -> Key:
    return f"RMSG#{chat_id}#{message_id}", "RMSG"


def old_chat_tombstone(sk: str) -> str | None:
    """The chat of an old chat tombstone's sort key (``C#<chatId>``), else None."""
    chat_id = sk.removeprefix(CHAT_PREFIX)
    return chat_id if sk.startswith(CHAT_PREFIX) and "#" not in chat_id else None


@dataclass
class MigrationReport:
    """What a run did: items copied to their new keys (by kind), old items deleted, and new
    keys that already held a different item (kept, the old one dropped)."""

    sessions: int = 0
    copied: Counter[str] = field(default_factory=Counter)
    deleted: int = 0
    conflicts: int = 0

    @property
    def changed(self) -> int:
        return sum(self.copied.values()) + self.deleted

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.copied.items())) or "none"
        return [
            f"sessions looked at: {self.sessions}",
            f"copied to new keys: {sum(self.copied.values())} ({kinds})",
            f"old items deleted: {self.deleted}",
            f"new keys already taken (kept): {self.conflicts}",
        ]


@dataclass
class _Session:
    id: str
    user_id: str | None = None
    chats: set[str] = field(default_factory=set)
    old_tombstones: list[Raw] = field(default_factory=list)  # ``C#<chatId>`` ones


def _s(item: Raw, name: str) -> str | None:
    value = item.get(name)
    return str(value["S"]) if value and "S" in value else None


class _Migration:
    def __init__(self, client: Any, table: str, *, delete_old: bool, workers: int) -> None:
        self._client = client
        self._table = table
        self._delete_old = delete_old
        self._workers = workers
        self._lock = threading.Lock()  # sessions migrate in parallel, counted here
        self.report = MigrationReport()

    def _count(self, copied: str | None = None, *, deleted: int = 0, conflicts: int = 0) -> None:
        with self._lock:
            if copied is not None:
                self.report.copied[copied] += 1
            self.report.deleted += deleted
            self.report.conflicts += conflicts

    # raw reads and writes

    def _pages(self, operation: str, **kwargs: Any) -> Iterator[Raw]:
        paginator = self._client.get_paginator(operation)
        for page in paginator.paginate(TableName=self._table, ConsistentRead=True, **kwargs):
            yield from page["Items"]

    def _query(self, pk: str, prefix: str | None = None) -> list[Raw]:
        condition, values = "pk = :pk", {":pk": {"S": pk}}
        if prefix is not None:
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": prefix}
        return list(
            self._pages("query", KeyConditionExpression=condition, ExpressionAttributeValues=values)
        )

    def _get(self, key: Key) -> Raw | None:
        pk, sk = key
        found = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": pk}, "sk": {"S": sk}},
            ConsistentRead=True,
        )
        item: Raw | None = found.get("Item")
        return item

    def _copy(self, kind: str, item: Raw, key: Key, **extra: Any) -> None:
        """The item under its new key, unless that key holds one already (live traffic wrote
        it, or an earlier run copied it)."""
        new = {**item, **extra, "pk": {"S": key[0]}, "sk": {"S": key[1]}}
        try:
            self._client.put_item(
                TableName=self._table, Item=new, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            if self._get(key) != new:
                self._count(conflicts=1)
            return
        self._count(kind)

    def _delete(self, item: Raw) -> None:
        if not self._delete_old:
            return
        gone = self._client.delete_item(
            TableName=self._table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            ReturnValues="ALL_OLD",
        )
        if gone.get("Attributes"):
            self._count(deleted=1)

    # the walk

    def run(self) -> MigrationReport:
        sessions = self._sessions()
        self.report.sessions = len(sessions)
        ordered = sorted(sessions.values(), key=lambda s: s.id)
        with ThreadPoolExecutor(max_workers=self._workers) as pool:
            for _ in pool.map(self._session, ordered):  # re-raises the first failure
                pass
        return self.report

    def _sessions(self) -> dict[str, _Session]:
        found: dict[str, _Session] = {}

        def of(session_id: str) -> _Session:
            return found.setdefault(session_id, _Session(session_id))

        for item in self._pages(
            "scan",
            FilterExpression="sk = :sk AND begins_with(pk, :prefix)",
            ExpressionAttributeValues={
                ":sk": {"S": SESSION_SK},
                ":prefix": {"S": SESSION_PREFIX},
            },
        ):
            of(str(_s(item, "id"))).user_id = _s(item, "userId")
        for tombstone in self._query(PURGE_PK):
            session = of(str(_s(tombstone, "sessionId")))
            if (user := _s(tombstone, "userId")) != UNKNOWN_USER:
                session.user_id = session.user_id or user
            session.chats |= set(tombstone.get("chatIds", {}).get("SS", []))
            if (chat_id := old_chat_tombstone(str(_s(tombstone, "sk")))) is not None:
                session.chats.add(chat_id)
                session.old_tombstones.append(tombstone)
        return found

    def _session(self, session: _Session) -> None:
        chats = {str(_s(item, "id")) for item in self._query(session_pk(session.id), CHAT_PREFIX)}
        runs = [
            self._run(str(_s(item, "runId"))) for item in self._query(session_runs_pk(session.id))
        ]
        known = [run for run in runs if run is not None]
        session.chats |= chats | {run.chat_id for run in known}
        session.user_id = session.user_id or next((run.user_id for run in known), None)
        for chat_id in sorted(session.chats):
            self._chat(session, chat_id, [run for run in known if run.chat_id == chat_id])
        for tombstone in session.old_tombstones:
            self._tombstone(session, tombstone)
        self._name_tombstone_user(session)

    def _run(self, run_id: str) -> Run | None:
        item = self._get(run_key(run_id))
        return run_from_json(json.loads(item["body"]["S"])) if item is not None else None

    def _chat(self, session: _Session, chat_id: str, runs: list[Run]) -> None:
        """Copy everything, then delete the old items in the same order: the chat id claim
        last (while it exists, a rerun finds this chat's old message partition)."""
        moves = self._moves(session, chat_id, runs)
        for kind, old, new in moves:
            if new is not None:
                self._copy(kind, old, new)
        for _, old, _ in moves:
            self._delete(old)

    def _moves(self, session: _Session, chat_id: str, runs: list[Run]) -> list[Move]:
        """The chat's old items and their new partition keys (None: the user is unknown, the
        old claim is only deleted). An old chat id claim another session holds means the old
        partitions are that session's (the id was freed and claimed again)."""
        moves: list[Move] = []
        for run in runs:
            if (marker := self._marker(run)) is not None:
                marker_key = message_run_key(run.session_id, run.chat_id, run.message_id)
                moves.append(("markers", marker, marker_key))
        claim = self._get(old_chat_claim_key(chat_id))
        if claim is not None and _s(claim, "sessionId") != session.id:
            return moves
        user = session.user_id
        if (run_claim := self._get(old_run_claim_key(chat_id))) is not None:
            moves.append(("run claims", run_claim, run_claim_key(session.id, chat_id)))
        for item in self._query(old_messages_pk(chat_id), MESSAGE_PREFIX):
            moves.append(
                ("messages", item, (messages_pk(session.id, chat_id), str(_s(item, "sk"))))
            )
            message_id = str(_s(item, "id"))
            if (message_claim := self._message_claim(chat_id, message_id)) is not None:
                claim_key = message_claim_key(user, message_id) if user is not None else None
                moves.append(("message claims", message_claim, claim_key))
        if claim is not None:
            claim_key = chat_claim_key(user, chat_id) if user is not None else None
            moves.append(("chat claims", claim, claim_key))
        return moves

    def _marker(self, run: Run) -> Raw | None:
        """The old marker of the message that started ``run``, if it names that run."""
        marker = self._get(old_message_run_key(run.chat_id, run.message_id))
        return marker if marker is not None and _s(marker, "runId") == run.id else None

    def _message_claim(self, chat_id: str, message_id: str) -> Raw | None:
        """The old claim of a message's id (from its item, never parsed from a key), if it
        is this chat's."""
        claim = self._get(old_message_claim_key(message_id))
        return claim if claim is not None and _s(claim, "chatId") == chat_id else None

    def _tombstone(self, session: _Session, old: Raw) -> None:
        """An old chat tombstone in the new shape, so the reconciler finishes it."""
        chat_id = str(old_chat_tombstone(str(_s(old, "sk"))))
        user = {"S": session.user_id or UNKNOWN_USER}
        new = chat_tombstone_key(session.id, chat_id)
        self._copy("tombstones", old, new, chatIds={"SS": [chat_id]}, userId=user)
        self._delete(old)

    def _name_tombstone_user(self, session: _Session) -> None:
        """A session tombstone written before the change names no user: the reconciler waits
        for one, to free the claims' new keys (``UNKNOWN_USER``: its old claims were deleted)."""
        pk, sk = session_tombstone_key(session.id)
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": pk}, "sk": {"S": sk}},
                UpdateExpression="SET userId = :user",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(userId)",
                ExpressionAttributeValues={":user": {"S": session.user_id or UNKNOWN_USER}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return
        self._count("tombstones")


def migrate_table(
    table: str,
    region: str,
    endpoint: str | None = None,
    *,
    delete_old: bool = True,
    workers: int = 8,
) -> MigrationReport:
    """Migrate the table in place (idempotent, resumable). ``delete_old=False`` runs the copy
    phase only (what a crash before the deletes leaves). Sessions migrate ``workers`` at a
    time, each one's items in order (an old chat id claim decides which session's they are)."""
    client = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint)
    return _Migration(client, table, delete_old=delete_old, workers=workers).run()
