"""The DynamoDB key-layout migration of ids per user (store/dynamodb_migrate.py): a table seeded
with items as the adapter wrote them before (raw puts, the old keys and attributes), migrated,
then read by the adapter and the run store of today."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from openagents.artifacts.folder import FolderArtifactStore
from openagents.cli import cli
from openagents.domain.models import Message, Role
from openagents.settings import Settings
from openagents.store.dynamodb import DynamoStore
from openagents.store.dynamodb_migrate import MigrationReport, migrate_table
from openagents.store.port import MessageIdTaken
from openagents.store.runs import Run, RunStatus, run_to_json, started_key
from openagents.store.runs_dynamodb import DynamoRunStore
from typer.testing import CliRunner

from tests.conftest import dynamodb_client, dynamodb_table
from tests.contract.helpers import create

USER = "ada/lovelace@corp"  # %-escaped in the new claim keys
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LARGE = "x" * 2000  # over the inline limit below: stored as an artifact (bodyRef)


@dataclass
class Seeded:
    store: DynamoStore
    settings: Settings
    session_id: str
    chat_id: str
    deleted_session: str

    def migrate(self, *, delete_old: bool = True) -> MigrationReport:
        s = self.settings
        return migrate_table(s.table_name, s.region, s.dynamodb_endpoint, delete_old=delete_old)


def _client(settings: Settings) -> Any:
    return dynamodb_client(settings.dynamodb_endpoint, settings.region)


def _put(settings: Settings, pk: str, sk: str, **attributes: Any) -> None:
    item: dict[str, Any] = {"pk": {"S": pk}, "sk": {"S": sk}}
    for name, value in attributes.items():
        item[name] = {"SS": sorted(value)} if isinstance(value, set) else {"S": str(value)}
    _client(settings).put_item(TableName=settings.table_name, Item=item)


def _scan(settings: Settings) -> list[dict[str, Any]]:
    pages = _client(settings).get_paginator("scan").paginate(TableName=settings.table_name)
    return [item for page in pages for item in page["Items"]]


def _snapshot(settings: Settings) -> list[str]:
    return sorted(json.dumps(item, sort_keys=True) for item in _scan(settings))


def _keys(settings: Settings) -> set[tuple[str, str]]:
    return {(item["pk"]["S"], item["sk"]["S"]) for item in _scan(settings)}


def _message(
    settings: Settings, chat_id: str, message_id: str, role: str, at: datetime, body: str
) -> None:
    """A message and its id claim as the adapter wrote them before (``C#<chatId>``,
    ``MID#<messageId>``); a large body as an artifact."""
    sk = f"M#{int(at.timestamp() * 1000):013d}#{message_id}"
    parts = json.dumps({"id": message_id, "role": role, "parts": [{"type": "text", "text": body}]})
    stored: dict[str, str] = {"body": parts}
    if len(body) > 1000:
        ref = f"messages/{chat_id}/{message_id}/0123456789abcdef.json"
        FolderArtifactStore(settings.artifacts_dir).put(ref, parts.encode())
        stored = {"bodyRef": ref}
    _put(
        settings,
        f"C#{chat_id}",
        sk,
        id=message_id,
        chatId=chat_id,
        role=role,
        createdAt=at.isoformat(),
        **stored,
    )
    _put(settings, f"MID#{message_id}", "MID", chatId=chat_id, role=role, messageSk=sk)


def _run(settings: Settings, session_id: str, chat_id: str, message_id: str) -> Run:
    run = Run(
        id=f"run-{chat_id}",
        session_id=session_id,
        chat_id=chat_id,
        user_id=USER,
        message_id=message_id,
        assistant_message_id="asst-1",
        model_id="scripted",
        started_at=AT,
        status=RunStatus.RUNNING,
    )
    client = _client(settings)
    client.put_item(
        TableName=settings.table_name,
        Item={
            "pk": {"S": f"RUN#{run.id}"},
            "sk": {"S": "RUN"},
            "body": {"S": json.dumps(run_to_json(run))},
            "version": {"N": "0"},
            "lastSeq": {"N": "0"},
        },
    )
    _put(settings, f"RSESS#{session_id}", started_key(run), runId=run.id)
    return run


@pytest.fixture
def seeded(settings: Settings) -> Seeded:
    """One user's session with a chat (a user message whose id holds ``#``, a large assistant
    reply, a running run with its claim and marker) and a chat deleted before the reconciler
    finished it; another session deleted (no session item, no run: its user unknown)."""
    settings = settings.model_copy(update={"inline_message_bytes": 1024})
    dynamodb_table(settings)
    store = DynamoStore(FolderArtifactStore(settings.artifacts_dir), settings.inline_message_bytes)
    session = create(store, USER)  # session and chat items: the same keys before and after
    chat_id = next(iter(session.chats))
    client = _client(settings)
    for item in _scan(settings):  # the claim create_session wrote, moved to the old key
        if item["pk"]["S"].startswith("CID#"):
            client.delete_item(
                TableName=settings.table_name, Key={"pk": item["pk"], "sk": item["sk"]}
            )
    _put(settings, f"CID#{chat_id}", "CID", sessionId=session.id)
    _message(settings, chat_id, "msg#1", "user", AT, "hello")
    _message(settings, chat_id, "asst-1", "assistant", AT.replace(second=5), LARGE)
    run = _run(settings, session.id, chat_id, "msg#1")
    _put(settings, f"RCHAT#{chat_id}", "CLAIM", activeRunId=run.id, lastRunId=run.id)
    _put(settings, f"RMSG#{chat_id}#msg#1", "RMSG", runId=run.id)
    # a chat deleted before: its tombstone names the chat in its sort key only
    _put(settings, "PURGE", "C#chat-gone", sessionId=session.id)
    _put(settings, "CID#chat-gone", "CID", sessionId=session.id)
    _message(settings, "chat-gone", "gone-1", "user", AT, "bye")
    # a session deleted before: its chat item already purged, its messages and claims not
    _put(settings, "PURGE", "S#sess-deleted", sessionId="sess-deleted", chatIds={"chat-z"})
    _put(settings, "CID#chat-z", "CID", sessionId="sess-deleted")
    _message(settings, "chat-z", "z-1", "user", AT, "zzz")
    return Seeded(store, settings, session.id, chat_id, "sess-deleted")


OLD_KEYS = {
    ("MID#msg#1", "MID"),
    ("MID#asst-1", "MID"),
    ("PURGE", "C#chat-gone"),
    ("CID#chat-gone", "CID"),
    ("MID#gone-1", "MID"),
    ("CID#chat-z", "CID"),
    ("MID#z-1", "MID"),
}


def _old_keys(seeded: Seeded) -> set[tuple[str, str]]:
    chat = seeded.chat_id
    old = OLD_KEYS | {(f"CID#{chat}", "CID"), (f"RCHAT#{chat}", "CLAIM")}
    old |= {(f"RMSG#{chat}#msg#1", "RMSG")}
    return {
        key
        for key in _keys(seeded.settings)
        if key in old or key[0] in {f"C#{chat}", "C#chat-gone", "C#chat-z"}
    }


def _assert_migrated(seeded: Seeded) -> None:
    store, runs = seeded.store, DynamoRunStore(seeded.store)
    assert _old_keys(seeded) == set()
    session = store.get_session(seeded.session_id)
    assert session is not None
    assert session.user_id == USER
    assert store.chat_session(USER, seeded.chat_id) == seeded.session_id  # the claim moved
    chat = store.get_chat(seeded.session_id, seeded.chat_id)
    assert chat is not None
    page = store.list_messages(seeded.session_id, seeded.chat_id, 50, None)
    assert [(m.id, m.role) for m in page.items] == [
        ("msg#1", Role.USER),
        ("asst-1", Role.ASSISTANT),
    ]
    assert page.items[1].parts["parts"][0]["text"] == LARGE  # the body_ref still resolves
    again = Message(
        id="msg#1", chat_id=chat.id, role=Role.USER, parts=page.items[0].parts, created_at=AT
    )
    assert store.put_message(session, chat, again, activity=None) == "unchanged"
    with pytest.raises(MessageIdTaken):  # the id is this chat's user message: not an assistant's
        store.put_message(
            session, chat, again.model_copy(update={"role": Role.ASSISTANT}), activity=None
        )
    latest = runs.latest(seeded.session_id, seeded.chat_id)
    assert latest is not None
    assert latest.id == f"run-{seeded.chat_id}"
    assert runs.active_run_id(seeded.session_id, seeded.chat_id) == latest.id
    retry = Run(
        id="run-retried",
        session_id=seeded.session_id,
        chat_id=seeded.chat_id,
        user_id=USER,
        message_id="msg#1",
        assistant_message_id="asst-2",
        model_id="scripted",
        started_at=AT,
    )
    started = runs.start(retry)  # the marker moved: the same message started that run
    assert not started.created
    assert started.run.id == latest.id
    # the reconciler finishes both old tombstones, their claims and messages with them
    assert store.purge_deleted() == 2
    left = json.dumps(_scan(seeded.settings))
    for gone in ("chat-gone", "gone-1", "chat-z", "z-1", seeded.deleted_session):
        assert gone not in left
    assert store.chat_session(USER, "chat-gone") is None
    assert [p.name for p in seeded.settings.artifacts_dir.rglob("*.json")] == [
        "0123456789abcdef.json"  # only the live chat's large body (chat-z's were small)
    ]


def test_migration_moves_every_old_key_and_the_adapter_reads_them(seeded: Seeded) -> None:
    old = _old_keys(seeded)
    assert seeded.store.purge_deleted() == 0  # old tombstones wait for the migration
    assert _old_keys(seeded) == old
    report = seeded.migrate()
    assert report.copied == {
        "messages": 4,
        "message claims": 3,  # the deleted session's claims are dropped (its user unknown)
        "chat claims": 2,
        "run claims": 1,
        "markers": 1,
        "tombstones": 2,  # the chat one rewritten, the session one given its (unknown) user
    }
    # messages, their claims, chat claims, the run claim, the marker, the old chat tombstone
    assert report.deleted == 4 + 4 + 3 + 1 + 1 + 1
    assert report.conflicts == 0
    before = _snapshot(seeded.settings)
    second = seeded.migrate()
    assert second.changed == 0
    assert _snapshot(seeded.settings) == before
    _assert_migrated(seeded)


def test_a_crash_after_the_copies_then_a_full_run_ends_the_same(seeded: Seeded) -> None:
    copied = seeded.migrate(delete_old=False)
    assert copied.deleted == 0
    assert sum(copied.copied.values()) == 13
    assert _old_keys(seeded)  # nothing deleted yet
    report = seeded.migrate()
    assert sum(report.copied.values()) == 0
    assert report.conflicts == 0
    assert report.deleted == 14
    assert seeded.migrate().changed == 0
    _assert_migrated(seeded)


def test_an_item_live_traffic_wrote_under_the_new_key_is_kept(seeded: Seeded) -> None:
    newer = f"RCHAT#{seeded.session_id}#{seeded.chat_id}"
    _put(seeded.settings, newer, "CLAIM", lastRunId="run-newer")
    report = seeded.migrate()
    assert report.conflicts == 1
    assert report.copied["run claims"] == 0
    assert _old_keys(seeded) == set()
    runs = DynamoRunStore(seeded.store)
    assert runs.active_run_id(seeded.session_id, seeded.chat_id) is None


def test_a_fresh_table_migrates_nothing(settings: Settings) -> None:
    dynamodb_table(settings)
    report = migrate_table(settings.table_name, settings.region, settings.dynamodb_endpoint)
    assert report.changed == 0
    assert report.sessions == 0
    assert _scan(settings) == []


def test_the_operator_command_migrates_the_configured_table(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = seeded.settings
    monkeypatch.setenv("OPENAGENTS_TABLE_NAME", s.table_name)
    monkeypatch.setenv("OPENAGENTS_REGION", s.region)
    monkeypatch.setenv("OPENAGENTS_DYNAMODB_ENDPOINT", str(s.dynamodb_endpoint))
    first = CliRunner().invoke(cli, ["migrate-table"])
    assert first.exit_code == 0, first.output
    assert "Items changed: 27" in first.output  # 13 copies, 14 deletes
    assert _old_keys(seeded) == set()
    second = CliRunner().invoke(cli, ["migrate-table"])
    assert "Items changed: 0" in second.output
