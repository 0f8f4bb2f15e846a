"""The DynamoDB adapter itself, on moto's server: request counts per access pattern, the item
layout of large bodies, and store outages. The semantics both adapters share (transactions,
the title registry, bodies, cursors, indexes, concurrency) are in tests/contract."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pynamodb.connection.base as pynamodb_base
import pytest
from botocore.client import BaseClient
from openagents import composition
from openagents.artifacts.folder import FolderArtifactStore
from openagents.composition import Container
from openagents.domain import naming
from openagents.domain.errors import Unavailable
from openagents.domain.identity import Identity
from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    LifecycleState,
    ListFilter,
    Message,
    Role,
    Session,
)
from openagents.events import from_entry
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from openagents.store import items
from openagents.store.dynamodb import DynamoStore
from openagents.store.keys import chat_claim_key
from openagents.store.mapping import chat_item
from openagents.store.port import RateWindow

ANY_STATE = frozenset(LifecycleState)
ALICE = Identity(user_id="alice", username="alice", name="Alice Liddell")
BOB = Identity(user_id="bob", username="bob")


class RecordingMetrics:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value


class Requests:
    """Every DynamoDB API call made by any botocore client of this process."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def reset(self) -> None:
        self.calls.clear()

    def counts(self) -> dict[str, int]:
        return dict(Counter(name for name, _ in self.calls))

    def params(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == operation]


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Requests:
    # PynamoDB opens a new botocore client for every transaction, so a hook registered on
    # one client's event system would miss TransactWriteItems: watch every client instead.
    seen = Requests()
    original = BaseClient._make_api_call  # type: ignore[attr-defined]

    def spy(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if client.meta.service_model.service_name == "dynamodb":
            seen.calls.append((operation, params))
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", spy)
    return seen


@pytest.fixture(autouse=True)
def _one_botocore_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed only: PynamoDB opens a new connection, hence a new botocore session that reloads
    the service models (~0.1 s), for every transaction. Share one session in these tests."""
    shared = botocore.session.get_session()
    monkeypatch.setattr(pynamodb_base, "get_session", lambda: shared)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """These tests are about the DynamoDB adapter: local mode on moto's DynamoDB."""
    return settings.model_copy(update={"store": "dynamodb"})


@pytest.fixture
def metrics() -> RecordingMetrics:
    return RecordingMetrics()


@pytest.fixture
def app(settings: Settings, metrics: RecordingMetrics) -> Container:
    return composition.build(settings, metrics)


@pytest.fixture
def store(settings: Settings, tmp_path: Path) -> DynamoStore:
    return DynamoStore(
        FolderArtifactStore(tmp_path / "store-artifacts"), settings.inline_message_bytes
    )


def scan(settings: Settings) -> list[tuple[str, str]]:
    client = boto3.client(
        "dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.region
    )
    keys: list[tuple[str, str]] = []
    for page in client.get_paginator("scan").paginate(TableName=settings.table_name):
        keys.extend((item["pk"]["S"], item["sk"]["S"]) for item in page["Items"])
    return sorted(keys)


def raw_item(settings: Settings, pk: str, sk: str) -> dict[str, Any]:
    client = boto3.client(
        "dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.region
    )
    item: dict[str, Any] = client.get_item(
        TableName=settings.table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}}
    )["Item"]
    return item


def new_objects(
    user_id: str, title: str, suffix: str
) -> tuple[Session, Chat, AuditEntry, RateWindow]:
    now = datetime.now(UTC)
    chat = Chat(
        id=f"chat-{suffix}",
        session_id=f"sess-{suffix}",
        title="New chat",
        created_at=now,
        updated_at=now,
    )
    session = Session(
        id=f"sess-{suffix}",
        user_id=user_id,
        title=title,
        created_at=now,
        updated_at=now,
        chats={chat.id: ChatMark(created_at=now, updated_at=now)},
    )
    entry = AuditEntry(
        id=f"evt-{suffix}", session_id=session.id, at=now, type="session.created", detail={}
    )
    rate = RateWindow(action=f"test-{suffix}", at=now, seconds=3600, limit=1000)
    return session, chat, entry, rate


# ------------------------------------------------------------ request counts


def test_create_session_is_one_transaction_of_seven_items(
    app: Container, settings: Settings, requests: Requests, metrics: RecordingMetrics
) -> None:
    session, chat = app.sessions.create(ALICE, NewSession())

    # the profile and the rate window (read, decided, written back in the transaction)
    assert requests.counts() == {"GetItem": 2, "Query": 1, "TransactWriteItems": 1}
    (tx,) = requests.params("TransactWriteItems")
    assert len(tx["TransactItems"]) == 7  # the six items and the outbox event
    assert metrics.counts["SessionCreated"] == 1

    keys = scan(settings)
    assert len(keys) == 7
    by_pk = Counter(pk.split("#", 1)[0] for pk, _ in keys)
    assert by_pk == {"S": 4, "CID": 1, "U": 2}
    assert any(pk == f"S#{session.id}" and sk.startswith("O#") for pk, sk in keys)
    assert (f"S#{session.id}", "SESSION") in keys
    assert (f"S#{session.id}", f"C#{chat.id}") in keys
    assert (f"CID#alice#{chat.id}", "CID") in keys  # chat ids are unique per user
    assert ("U#alice", f"T#{session.title}") in keys
    assert any(pk == f"S#{session.id}" and sk.startswith("E#") for pk, sk in keys)
    assert ("U#alice", "R#create-session") in keys  # the sliding rate window
    assert session.title in naming.CITIES
    assert chat.title == "New chat"
    assert chat.model_id == settings.default_model_id


def test_create_with_a_given_title_reads_no_titles(
    app: Container, store: DynamoStore, requests: Requests
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="  My work  "))
    assert requests.counts() == {"GetItem": 2, "TransactWriteItems": 1}  # profile, rate window
    assert session.title == "My work"
    assert "My work" in store.used_titles("alice")  # given titles are registered too


def test_get_session_is_one_get_item(app: Container, requests: Requests) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="T"))
    requests.reset()
    got = app.sessions.get(ALICE, session.id)
    assert requests.counts() == {"GetItem": 1}
    assert got.id == session.id
    assert got.title == "T"


def seed_sessions(store: DynamoStore, user_id: str, count: int, chats: int) -> None:
    """``count`` sessions of ``chats`` chats each: each session through the store's create
    transaction, the other chats (items and id claims) in batches to keep the test quick."""
    extra: list[Chat] = []
    for _ in range(count):
        n = uuid.uuid4().hex[:10]
        session, chat, entry, rate = new_objects(user_id, f"Seed {n}", n)
        more = [chat.model_copy(update={"id": f"{chat.id}-{i}"}) for i in range(chats - 1)]
        marks = {c.id: ChatMark(created_at=c.created_at, updated_at=c.updated_at) for c in more}
        session = session.model_copy(update={"chats": {**session.chats, **marks}})
        store.create_session(session, chat, entry, claim_title=True, rate=rate)
        extra += more
    with items.ChatItem.batch_write() as batch:
        for chat in extra:
            batch.save(chat_item(chat))
            claim = chat_claim_key(user_id, chat.id)
            batch.save(items.ChatClaimItem(*claim, session_id=chat.session_id))


def test_list_sessions_costs_the_same_for_1_and_30_sessions(
    app: Container, store: DynamoStore, requests: Requests
) -> None:
    def add_sessions(count: int) -> None:
        seed_sessions(store, "alice", count, chats=5)

    add_sessions(1)
    requests.reset()
    listed = app.sessions.list(ALICE, ListFilter.ALL, None, None)
    assert requests.counts() == {"Query": 1, "GetItem": 1}
    assert len(listed.page.items) == 1

    add_sessions(29)
    requests.reset()
    listed = app.sessions.list(ALICE, ListFilter.ALL, None, None)
    assert requests.counts() == {"Query": 1, "GetItem": 1}
    assert len(listed.page.items) == 30
    assert listed.page.cursor is None
    assert all(len(s.chats) == 5 for s in listed.page.items)
    assert all(s.latest_chat_id in s.chats for s in listed.page.items)
    created = [s.created_at for s in listed.page.items]
    assert created == sorted(created, reverse=True)
    assert [len(app.chats.list(ALICE, s.id)) for s in listed.page.items[:2]] == [5, 5]


def test_chat_and_message_access_patterns_are_one_request_each(
    app: Container, store: DynamoStore, requests: Requests
) -> None:
    session, chat = app.sessions.create(ALICE, NewSession(title="T"))
    session = app.sessions.get(ALICE, session.id)
    message = Message(
        id="m-1",
        chat_id=chat.id,
        role=Role.ASSISTANT,
        parts={"id": "m-1", "role": "assistant", "parts": []},
        created_at=datetime.now(UTC),
    )
    requests.reset()
    assert store.put_message(session, chat, message, activity=None) == "inserted"
    assert requests.counts() == {"TransactWriteItems": 1}

    requests.reset()
    assert [c.id for c in store.list_chats(session.id)] == [chat.id]
    assert requests.counts() == {"Query": 1}

    requests.reset()
    page = store.list_messages(chat.session_id, chat.id, 10, None)
    assert requests.counts() == {"Query": 1}
    assert [m.id for m in page.items] == ["m-1"]


# ------------------------------------------------------------ the events outbox


def test_an_event_is_an_outbox_item_of_the_envelope_with_a_ttl(
    store: DynamoStore, settings: Settings
) -> None:
    """The item the stream carries: the event's ``detail`` as PutEvents would send it, its
    detail-type, and an expiry two days after the entry (the table's TTL attribute)."""
    session, chat, entry, rate = new_objects("alice", "Outboxed", uuid.uuid4().hex[:10])
    store.create_session(session, chat, entry, claim_title=True, rate=rate)
    item = raw_item(settings, f"S#{session.id}", f"O#{entry.at.isoformat()}#{entry.id}")
    assert item["detailType"] == {"S": "Session Created"}
    assert json.loads(item["event"]["S"]) == from_entry(entry, "alice").detail
    assert int(item[items.TTL_ATTRIBUTE]["N"]) == int(entry.at.timestamp()) + 2 * 24 * 3600


def test_a_transition_adds_its_event_to_its_one_transaction(
    store: DynamoStore, requests: Requests
) -> None:
    session, chat, entry, rate = new_objects("alice", "Moves", uuid.uuid4().hex[:10])
    store.create_session(session, chat, entry, claim_title=True, rate=rate)
    moved = AuditEntry(id="evt-moved", session_id=session.id, at=datetime.now(UTC), type="t.x")
    requests.reset()
    store.transition(session.id, expect=ANY_STATE, changes={}, entry=moved)
    # the owner is known (this store wrote the session): no read before the write
    assert requests.counts() == {"TransactWriteItems": 1, "GetItem": 1}
    (tx,) = requests.params("TransactWriteItems")
    puts = sorted(i["Put"]["Item"]["sk"]["S"][:2] for i in tx["TransactItems"] if "Put" in i)
    assert puts == ["E#", "O#"]  # with the session's update: three items, one request
    assert len(tx["TransactItems"]) == 3

    requests.reset()
    store.append_entry(moved.model_copy(update={"id": "evt-outcome"}))
    assert requests.counts() == {"TransactWriteItems": 1}
    (tx,) = requests.params("TransactWriteItems")
    assert len(tx["TransactItems"]) == 2


def test_an_unseen_session_owner_is_read_once(
    store: DynamoStore, settings: Settings, tmp_path: Path, requests: Requests
) -> None:
    """A store that never saw the session reads its owner (``userId`` only), then remembers."""
    session, chat, entry, rate = new_objects("bob", "Elsewhere", uuid.uuid4().hex[:10])
    store.create_session(session, chat, entry, claim_title=True, rate=rate)
    other = DynamoStore(FolderArtifactStore(tmp_path / "other"), settings.inline_message_bytes)
    requests.reset()
    for n in range(2):
        other.append_entry(
            AuditEntry(id=f"evt-{n}", session_id=session.id, at=datetime.now(UTC), type="t.y")
        )
    assert requests.counts() == {"GetItem": 1, "TransactWriteItems": 2}
    (get,) = requests.params("GetItem")
    assert get["ProjectionExpression"] == "#0"
    assert get["ExpressionAttributeNames"] == {"#0": "userId"}


# -------------------------------------------------------- messages and bodies


def files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def assistant(chat: Chat, parts: dict[str, Any], message_id: str = "big") -> Message:
    return Message(
        id=message_id,
        chat_id=chat.id,
        role=Role.ASSISTANT,
        parts=parts,
        created_at=datetime.now(UTC),
    )


def big_body(settings: Settings, message_id: str = "big") -> dict[str, Any]:
    text = "x" * (settings.inline_message_bytes + 10)
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


def small_body(text: str, message_id: str = "big") -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


@pytest.fixture
def target(app: Container) -> tuple[Session, Chat]:
    session, chat = app.sessions.create(ALICE, NewSession(title="T"))
    return app.sessions.get(ALICE, session.id), chat


def test_a_large_body_is_a_pointer_in_the_item(
    store: DynamoStore, settings: Settings, tmp_path: Path, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    folder = tmp_path / "store-artifacts"
    big = big_body(settings)

    assert store.put_message(session, chat, assistant(chat, big), activity=None) == "inserted"

    (stored,) = files(folder)
    assert json.loads(stored.read_text()) == big
    claim = raw_item(settings, "MID#alice#big", "MID")
    item = raw_item(settings, f"C#{chat.session_id}#{chat.id}", claim["messageSk"]["S"])
    assert "body" not in item
    assert item["bodyRef"]["S"] == stored.relative_to(folder).as_posix()
    assert store.list_messages(chat.session_id, chat.id, 10, None).items[0].parts == big

    small = small_body("short")
    assert store.put_message(session, chat, assistant(chat, small), activity=None) == "updated"
    assert files(folder) == []  # the replaced body is dropped
    item = raw_item(settings, f"C#{chat.session_id}#{chat.id}", claim["messageSk"]["S"])
    assert "bodyRef" not in item
    assert json.loads(item["body"]["S"]) == small
    assert store.list_messages(chat.session_id, chat.id, 10, None).items[0].parts == small


# ---------------------------------------------------------------- outages


def test_store_outage_is_unavailable(
    app: Container, settings: Settings, metrics: RecordingMetrics
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="T"))
    down = composition.build(
        settings.model_copy(update={"dynamodb_endpoint": "http://127.0.0.1:1"}), metrics
    )  # the same table behind an endpoint that answers nothing
    with pytest.raises(Unavailable) as info:
        down.sessions.get(ALICE, session.id)
    assert info.value.code == "unavailable"
    with pytest.raises(Unavailable):
        down.sessions.list(ALICE, ListFilter.ALL, None, None)
    with pytest.raises(Unavailable):
        down.sessions.create(ALICE, NewSession(title="during outage"))
    assert app.sessions.get(ALICE, session.id).title == "T"  # each store on its own binding


def test_transaction_outage_is_unavailable(
    app: Container, settings: Settings, tmp_path: Path
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="T"))
    session = app.sessions.get(ALICE, session.id)
    chat = Chat(
        id="c2",
        session_id=session.id,
        title="New chat",
        created_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
    )
    table = items.Table(settings.table_name, "http://127.0.0.1:1", settings.region)
    down = DynamoStore(FolderArtifactStore(tmp_path / "down"), settings.inline_message_bytes, table)
    with pytest.raises(Unavailable):
        down.create_chat(session, chat, 10)
    assert [v.chat.id for v in app.chats.list(ALICE, session.id)] == [next(iter(session.chats))]


@pytest.fixture(autouse=True)
def _rebind_after(settings: Settings) -> Iterator[None]:
    yield
    items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
