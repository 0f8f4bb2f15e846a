"""The one-machine DynamoDB (``OPENAGENTS_STORE=dynamodb``): moto on 127.0.0.1, its items dumped
to the home folder on stop and loaded back on the next start; and the move to SQLite: the dump is
imported once into the SQLite store, then renamed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from openagents import composition
from openagents.artifacts.folder import FolderArtifactStore
from openagents.cli import start_moto
from openagents.domain.identity import Identity
from openagents.domain.models import ListFilter, Message, Role, SessionStatus
from openagents.local.dynamodb import DUMP_FILE, LocalDynamo, import_dump
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from openagents.store import items
from openagents.store.dynamodb import DynamoStore
from openagents.store.keys import messages_pk
from openagents.store.runs import JsonValue

from tests.support import NoMetrics

ALICE = Identity(user_id="alice", username="alice")


@pytest.fixture
def table() -> str:
    # moto keeps tables in process-wide memory, shared by every server of this process:
    # a table name of its own keeps this test apart from the others.
    return f"openagents-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def started(tmp_path: Path, table: str, moto_endpoint: str) -> Iterator[list[LocalDynamo]]:
    running: list[LocalDynamo] = []
    yield running
    for dynamo in running:
        dynamo.stop()
    client = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name="us-east-1")
    if table in client.list_tables()["TableNames"]:
        client.delete_table(TableName=table)


def start(home: Path, table: str, running: list[LocalDynamo]) -> LocalDynamo:
    dynamo = LocalDynamo(home, table, "us-east-1")
    dynamo.start()
    running.append(dynamo)
    return dynamo


def services(home: Path, table: str, dynamo: LocalDynamo) -> composition.Container:
    settings = Settings(
        home=home,
        store="dynamodb",
        table_name=table,
        dynamodb_endpoint=dynamo.endpoint,
        provision_on_create=False,  # no sandbox workflow here
    )
    return composition.build(settings, NoMetrics())


def drop_table(endpoint: str, table: str) -> None:
    """Forget the in-memory table, so that only the dump can bring the data back."""
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    client.delete_table(TableName=table)
    assert table not in client.list_tables()["TableNames"]


def test_data_survives_a_restart(
    tmp_path: Path, table: str, moto_endpoint: str, started: list[LocalDynamo]
) -> None:
    home = tmp_path / "home"
    first = start(home, table, started)
    app = services(home, table, first)
    session, chat = app.sessions.create(ALICE, NewSession(title="Persistent"))
    app.chats.post_message(
        ALICE,
        session.id,
        chat.id,
        message_id="m-1",
        role=Role.USER,
        ui_message={"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "keep me"}]},
    )
    second_chat = app.chats.create(ALICE, session.id, "second-chat")

    first.stop()
    started.remove(first)
    assert (home / DUMP_FILE).exists()
    drop_table(moto_endpoint, table)

    second = start(home, table, started)
    assert second.endpoint != first.endpoint
    app = services(home, table, second)
    restored = app.sessions.get(ALICE, session.id)
    assert restored.title == "Persistent"
    assert set(restored.chats) == {chat.id, second_chat.id}
    listed = app.sessions.list(ALICE, ListFilter.ALL, None, None).page.items
    assert [s.id for s in listed] == [session.id]  # the list index is rebuilt too
    messages = app.chats.messages(ALICE, session.id, chat.id, None, None).items
    assert [m.parts["parts"][0]["text"] for m in messages] == ["keep me"]
    assert app.chats.get(ALICE, session.id, chat.id).chat.title == "keep me"
    # claims came back as well: the ids are still taken
    assert app.chats.create(ALICE, session.id, "second-chat").id == "second-chat"
    assert len(app.chats.list(ALICE, session.id)) == 2


def test_start_without_a_dump_is_empty(
    tmp_path: Path, table: str, started: list[LocalDynamo]
) -> None:
    home = tmp_path / "fresh"
    dynamo = start(home, table, started)
    assert dynamo.load() == 0
    app = services(home, table, dynamo)
    assert app.sessions.list(ALICE, ListFilter.ALL, None, None).page.items == []


def test_dump_is_a_json_list_written_atomically(
    tmp_path: Path, table: str, started: list[LocalDynamo], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    dynamo = start(home, table, started)
    app = services(home, table, dynamo)
    app.sessions.create(ALICE, NewSession(title="One"))

    count = dynamo.dump()

    path = home / DUMP_FILE
    rows = json.loads(path.read_text())
    assert isinstance(rows, list)
    assert len(rows) == count == 7  # session, chat, chat claim, audit, outbox, title, rate counter
    assert all({"pk", "sk"} <= set(row) for row in rows)
    assert {row["sk"]["S"] for row in rows} >= {"SESSION", "CID"}
    assert not [p for p in home.iterdir() if p.name.startswith(".dump-")]
    good = path.read_bytes()

    app.sessions.create(ALICE, NewSession(title="Two"))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", broken)  # the dump writes through json.dump
    with pytest.raises(OSError, match="disk full"):
        dynamo.dump()
    assert path.read_bytes() == good  # a failed dump never leaves a half-written file
    monkeypatch.undo()

    # one more session: session, chat, chat claim, audit entry, outbox item, title (same rate
    # counter)
    assert dynamo.dump() == 13
    assert len(json.loads(path.read_text())) == 13


def fill(app: composition.Container) -> tuple[str, str, str]:
    """A session with two chats, a message in the first, one archived session."""
    session, chat = app.sessions.create(ALICE, NewSession(title="Persistent"))
    app.chats.post_message(
        ALICE,
        session.id,
        chat.id,
        message_id="m-1",
        role=Role.USER,
        ui_message={"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "keep me"}]},
    )
    second = app.chats.create(ALICE, session.id, "second-chat")
    old, _ = app.sessions.create(ALICE, NewSession(title="Old"))
    app.sessions.update(ALICE, old.id, title=None, status=SessionStatus.ARCHIVED)
    return session.id, chat.id, second.id


def sqlite_services(home: Path) -> composition.Container:
    settings = Settings(home=home, store="sqlite", provision_on_create=False)
    return composition.build(settings, NoMetrics())


def check_imported(app: composition.Container, session_id: str, chat_id: str, second: str) -> None:
    restored = app.sessions.get(ALICE, session_id)
    assert restored.title == "Persistent"
    assert set(restored.chats) == {chat_id, second}
    listed = app.sessions.list(ALICE, ListFilter.ACTIVE, None, None)
    assert [s.id for s in listed.page.items] == [session_id]
    assert listed.archived_count == 1
    messages = app.chats.messages(ALICE, session_id, chat_id, None, None).items
    assert [m.parts["parts"][0]["text"] for m in messages] == ["keep me"]
    assert app.chats.get(ALICE, session_id, chat_id).chat.title == "keep me"
    assert app.chats.create(ALICE, session_id, second).id == second  # the id is still taken
    assert len(app.chats.list(ALICE, session_id)) == 2
    renamed = app.sessions.update(ALICE, session_id, title="Renamed", status=None)
    assert renamed.title == "Renamed"  # the title registry came along


def test_a_dump_is_imported_once_into_sqlite(
    tmp_path: Path, table: str, started: list[LocalDynamo]
) -> None:
    home = tmp_path / "home"
    dynamo = start(home, table, started)
    ids = fill(services(home, table, dynamo))
    dynamo.stop()
    started.remove(dynamo)
    db = home / "openagents.db"

    assert import_dump(home, db) > 0

    assert not (home / DUMP_FILE).exists()
    assert (home / f"{DUMP_FILE}.imported").exists()
    app = sqlite_services(home)
    check_imported(app, *ids)
    assert import_dump(home, db) == 0  # once: the renamed dump is left alone
    assert app.sessions.get(ALICE, ids[0]).title == "Renamed"


def test_dev_on_sqlite_imports_the_dump_and_runs_no_dynamodb(
    tmp_path: Path, table: str, started: list[LocalDynamo]
) -> None:
    home = tmp_path / "home"
    dynamo = start(home, table, started)
    ids = fill(services(home, table, dynamo))
    dynamo.stop()
    started.remove(dynamo)

    moto, table_runtime = start_moto(Settings(home=home, store="sqlite"))
    try:
        assert table_runtime is None  # no DynamoDB table, no dump/load
        assert not isinstance(moto, LocalDynamo)
        assert (home / f"{DUMP_FILE}.imported").exists()
        check_imported(sqlite_services(home), *ids)
    finally:
        moto.stop()
    assert not (home / DUMP_FILE).exists()  # nothing dumps on stop


@pytest.fixture(autouse=True)
def _rebind_after(settings: Settings) -> Iterator[None]:
    """LocalDynamo binds the process-wide models to its server: point them back."""
    yield
    items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)


def test_a_live_message_s_segments_are_imported_and_replaced_ones_are_not(
    tmp_path: Path, table: str, started: list[LocalDynamo]
) -> None:
    """A dump taken while a turn was live holds its assistant message as a body and the
    segments written after it (and one the body replaced, left by a crash before its
    clean-up): SQLite reads the same message back."""
    home = tmp_path / "home"
    dynamo = start(home, table, started)
    app = services(home, table, dynamo)
    session, chat = app.sessions.create(ALICE, NewSession(title="Live"))
    bound = items.Table(table, dynamo.endpoint, "us-east-1")
    store = DynamoStore(FolderArtifactStore(home / "artifacts"), 300_000, bound)
    at = datetime.now(UTC)

    def text(n: int) -> JsonValue:
        return {"type": "text", "text": f"part {n}", "state": "done"}

    def write(parts: list[JsonValue], kept: int, note: str) -> Message:
        body: dict[str, JsonValue] = {
            "id": "a-1",
            "role": "assistant",
            "parts": parts,
            "metadata": {"note": note},
        }
        message = Message(id="a-1", chat_id=chat.id, role=Role.ASSISTANT, parts=body, created_at=at)
        owner = app.sessions.get(ALICE, session.id)
        stored = app.chats.get(ALICE, session.id, chat.id).chat
        if kept == 0:
            store.put_message(owner, stored, message, activity=None)
        else:
            assert store.put_segment(owner, stored, message, kept)
        return message

    write([text(1)], 0, "first")
    write([text(1), text(2)], 1, "replaced")
    write([text(1), text(2)], 0, "whole")  # the body replaces segment 1 (and deletes it)
    last = write([text(1), text(2), text(3)], 2, "live")
    live = [sk for item in bound[items.SegmentItem].scan() if (sk := item.sk).startswith("MS#")]
    assert len(live) == 1
    stale = bound[items.SegmentItem](messages_pk(session.id, chat.id), live[0][:-6] + "000001")
    stale.start, stale.body, stale.size = 1, json.dumps({"parts": [text(9)]}), 10
    stale.save()  # as a crash between the whole write and its clean-up leaves it
    dynamo.stop()
    started.remove(dynamo)
    dumped = [row["sk"]["S"] for row in json.loads((home / DUMP_FILE).read_text())]
    assert len([sk for sk in dumped if sk.startswith("MS#")]) == 2

    assert import_dump(home, home / "openagents.db") > 0

    messages = sqlite_services(home).chats.messages(ALICE, session.id, chat.id, None, None).items
    assert [m.parts for m in messages] == [last.parts]
