"""The DynamoDB store and the services on moto's server: request counts per access pattern,
all-or-nothing transactions, the title registry, large bodies and store outages."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
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
from openagents.domain.errors import Conflict, NotFound, RateLimited, Unavailable
from openagents.domain.identity import Identity
from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    ListFilter,
    Message,
    Role,
    Session,
)
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from openagents.store import items
from openagents.store.dynamodb import DynamoStore
from openagents.store.mapping import chat_item
from openagents.store.port import MessageIdTaken, RateWindow, TitleTaken

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


def candidates(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> None:
    """Make the service try exactly these generated titles, in order."""
    monkeypatch.setattr(naming, "city_candidates", lambda used: iter(names))


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
    rate = RateWindow(
        action=f"test-{suffix}",
        starts_at=now.replace(minute=0, second=0, microsecond=0),
        ends_at=now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1),
        limit=1000,
    )
    return session, chat, entry, rate


# ------------------------------------------------------------ request counts


def test_create_session_is_one_transaction_of_six_items(
    app: Container, settings: Settings, requests: Requests, metrics: RecordingMetrics
) -> None:
    session, chat = app.sessions.create(ALICE, NewSession())

    assert requests.counts() == {"GetItem": 1, "Query": 1, "TransactWriteItems": 1}
    (tx,) = requests.params("TransactWriteItems")
    assert len(tx["TransactItems"]) == 6
    assert metrics.counts["SessionCreated"] == 1

    keys = scan(settings)
    assert len(keys) == 6
    by_pk = Counter(pk.split("#", 1)[0] for pk, _ in keys)
    assert by_pk == {"S": 3, "CID": 1, "U": 2}
    assert (f"S#{session.id}", "SESSION") in keys
    assert (f"S#{session.id}", f"C#{chat.id}") in keys
    assert (f"CID#{chat.id}", "CID") in keys
    assert ("U#alice", f"T#{session.title}") in keys
    assert any(pk == f"S#{session.id}" and sk.startswith("E#") for pk, sk in keys)
    assert any(pk == "U#alice" and sk.startswith("R#create-session#") for pk, sk in keys)
    assert session.title in naming.CITIES
    assert chat.title == "New chat"
    assert chat.model_id == settings.default_model_id


def test_create_with_a_given_title_reads_no_titles(
    app: Container, store: DynamoStore, requests: Requests
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="  My work  "))
    assert requests.counts() == {"GetItem": 1, "TransactWriteItems": 1}
    assert session.title == "My work"
    assert "My work" in store.used_titles("alice")  # given titles are registered too


def test_given_titles_may_repeat(app: Container) -> None:
    first, _ = app.sessions.create(ALICE, NewSession(title="Same"))
    second, _ = app.sessions.create(ALICE, NewSession(title="Same"))
    assert first.id != second.id
    assert second.title == "Same"


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
            batch.save(items.ChatClaimItem(f"CID#{chat.id}", "CID", session_id=chat.session_id))


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
    page = store.list_messages(chat.id, 10, None)
    assert requests.counts() == {"Query": 1}
    assert [m.id for m in page.items] == ["m-1"]


# --------------------------------------------------- all-or-nothing creates


def test_rate_limited_create_leaves_nothing_behind(
    settings: Settings, metrics: RecordingMetrics
) -> None:
    app = composition.build(settings.model_copy(update={"rate_limit_per_minute": 2}), metrics)
    app.sessions.create(ALICE, NewSession(title="one"))
    app.sessions.create(ALICE, NewSession(title="two"))
    before = scan(settings)

    with pytest.raises(RateLimited) as info:
        app.sessions.create(ALICE, NewSession(title="three"))

    assert 1 <= info.value.retry_after_seconds <= settings.rate_limit_window_seconds
    assert scan(settings) == before
    assert metrics.counts["SessionCreated"] == 2
    # the limit is per user
    app.sessions.create(BOB, NewSession(title="bob's"))
    assert len(scan(settings)) > len(before)


def test_claimed_title_is_taken_and_the_transaction_writes_nothing(
    app: Container, store: DynamoStore, settings: Settings
) -> None:
    existing, _ = app.sessions.create(ALICE, NewSession())
    before = scan(settings)

    session, chat, entry, rate = new_objects("alice", existing.title, "x")
    with pytest.raises(TitleTaken):
        store.create_session(session, chat, entry, claim_title=True, rate=rate)
    assert scan(settings) == before
    assert store.get_session(session.id) is None

    # another user's registry is separate, and an unclaimed title goes through
    bobs = new_objects("bob", existing.title, "b")
    store.create_session(*bobs[:3], claim_title=True, rate=bobs[3])
    free = new_objects("alice", "Unused title", "y")
    store.create_session(*free[:3], claim_title=True, rate=free[3])
    assert store.get_session("sess-y") is not None
    assert len(scan(settings)) == len(before) + 12


def test_generated_title_race_retries_with_the_next_candidate(
    app: Container, store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    candidates(monkeypatch, ["Paris"])
    app.sessions.create(ALICE, NewSession())
    candidates(monkeypatch, ["Paris", "Paris", "Rome"])  # a stale read: Paris is taken

    session, _ = app.sessions.create(ALICE, NewSession())

    assert session.title == "Rome"
    assert store.used_titles("alice") == {"Paris", "Rome"}
    listed = app.sessions.list(ALICE, ListFilter.ALL, None, None).page.items
    assert sorted(s.title for s in listed) == ["Paris", "Rome"]


def test_generated_title_gives_up_after_eight_attempts(
    app: Container, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    candidates(monkeypatch, ["Paris"])
    app.sessions.create(ALICE, NewSession())
    before = scan(settings)
    candidates(monkeypatch, ["Paris"] * 20)
    with pytest.raises(Conflict):
        app.sessions.create(ALICE, NewSession())
    assert scan(settings) == before


# ------------------------------------------------------------ title registry


def test_title_is_free_again_after_delete(
    app: Container, store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession())
    assert session.title in store.used_titles("alice")

    app.sessions.delete(ALICE, session.id)

    assert session.title not in store.used_titles("alice")
    candidates(monkeypatch, [session.title])
    again, _ = app.sessions.create(ALICE, NewSession())
    assert again.title == session.title
    assert again.id != session.id


def test_title_is_free_again_after_rename(
    app: Container, store: DynamoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _ = app.sessions.create(ALICE, NewSession())
    old = session.title

    renamed = app.sessions.update(ALICE, session.id, title="  Renamed  ", status=None)

    assert renamed.title == "Renamed"
    assert app.sessions.get(ALICE, session.id).title == "Renamed"
    assert store.used_titles("alice") == {"Renamed"}
    candidates(monkeypatch, [old])
    again, _ = app.sessions.create(ALICE, NewSession())
    assert again.title == old
    # the renamed title is claimed: a generated create cannot take it
    candidates(monkeypatch, ["Renamed"] * 8)
    with pytest.raises(Conflict):
        app.sessions.create(ALICE, NewSession())


def test_used_titles_are_per_user(app: Container, store: DynamoStore) -> None:
    a, _ = app.sessions.create(ALICE, NewSession(title="Alpha"))
    app.sessions.create(BOB, NewSession(title="Beta"))
    assert store.used_titles("alice") == {"Alpha"}
    assert store.used_titles("bob") == {"Beta"}
    assert a.user_id == "alice"


def test_delete_session_removes_every_item(
    app: Container, settings: Settings, metrics: RecordingMetrics
) -> None:
    keep, _ = app.sessions.create(BOB, NewSession(title="Keep"))
    before = scan(settings)
    session, chat = app.sessions.create(ALICE, NewSession(title="Gone"))
    extra = app.chats.create(ALICE, session.id, "extra-chat")
    for i, target in enumerate((chat.id, extra.id)):
        app.chats.post_message(
            ALICE,
            session.id,
            target,
            message_id=f"m-{i}",
            role=Role.USER,
            ui_message={"id": f"m-{i}", "role": "user", "parts": []},
        )

    app.sessions.delete(ALICE, session.id)

    remaining = [k for k in scan(settings) if not k[0].startswith("U#alice")]
    assert remaining == before
    assert metrics.counts["SessionDeleted"] == 1
    with pytest.raises(NotFound):
        app.sessions.get(ALICE, session.id)
    assert app.sessions.get(BOB, keep.id).title == "Keep"


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


def test_large_bodies_live_in_the_artifact_store(
    store: DynamoStore, settings: Settings, tmp_path: Path, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    folder = tmp_path / "store-artifacts"
    big = big_body(settings)

    assert store.put_message(session, chat, assistant(chat, big), activity=None) == "inserted"

    (stored,) = files(folder)
    assert json.loads(stored.read_text()) == big
    claim = raw_item(settings, "MID#big", "MID")
    item = raw_item(settings, f"C#{chat.id}", claim["messageSk"]["S"])
    assert "body" not in item
    assert item["bodyRef"]["S"] == stored.relative_to(folder).as_posix()
    assert store.list_messages(chat.id, 10, None).items[0].parts == big

    small = small_body("short")
    assert store.put_message(session, chat, assistant(chat, small), activity=None) == "updated"
    assert files(folder) == []  # the replaced body is dropped
    item = raw_item(settings, f"C#{chat.id}", claim["messageSk"]["S"])
    assert "bodyRef" not in item
    assert json.loads(item["body"]["S"]) == small
    assert store.list_messages(chat.id, 10, None).items[0].parts == small


def test_inline_assistant_message_can_be_updated(
    store: DynamoStore, settings: Settings, tmp_path: Path, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    first = small_body("first", "m")
    second = small_body("second", "m")
    assert (
        store.put_message(session, chat, assistant(chat, first, "m"), activity=None) == "inserted"
    )
    assert (
        store.put_message(session, chat, assistant(chat, second, "m"), activity=None) == "updated"
    )
    assert store.list_messages(chat.id, 10, None).items[0].parts == second

    big = big_body(settings, "m")
    assert store.put_message(session, chat, assistant(chat, big, "m"), activity=None) == "updated"
    assert len(files(tmp_path / "store-artifacts")) == 1
    assert store.list_messages(chat.id, 10, None).items[0].parts == big


def test_deleting_a_chat_drops_its_messages_and_bodies(
    store: DynamoStore, settings: Settings, tmp_path: Path, target: tuple[Session, Chat]
) -> None:
    session, chat = target
    store.put_message(session, chat, assistant(chat, big_body(settings)), activity=None)
    store.put_message(session, chat, assistant(chat, small_body("s", "s"), "s"), activity=None)
    now = datetime.now(UTC)
    second = Chat(
        id="second", session_id=session.id, title="New chat", created_at=now, updated_at=now
    )
    store.create_chat(session, second, 10)
    assert len(files(tmp_path / "store-artifacts")) == 1

    store.delete_chat(session, chat.id)

    assert files(tmp_path / "store-artifacts") == []
    assert store.list_messages(chat.id, 10, None).items == []
    keys = scan(settings)
    assert not [k for k in keys if k[0] in {"MID#big", "MID#s", f"CID#{chat.id}", f"C#{chat.id}"}]
    assert (f"S#{session.id}", f"C#{chat.id}") not in keys
    assert store.get_chat(session.id, "second") is not None


def test_conflicting_message_id_keeps_its_body_and_leaves_no_artifact(
    app: Container, store: DynamoStore, settings: Settings, tmp_path: Path
) -> None:
    session, chat = app.sessions.create(ALICE, NewSession(title="T"))
    other = app.chats.create(ALICE, session.id, "other")
    session = app.sessions.get(ALICE, session.id)
    now = datetime.now(UTC)
    original = {"id": "m", "role": "assistant", "parts": [{"type": "text", "text": "original"}]}
    store.put_message(
        session,
        chat,
        Message(id="m", chat_id=chat.id, role=Role.ASSISTANT, parts=original, created_at=now),
        activity=None,
    )
    huge = {"id": "m", "role": "assistant", "parts": ["y" * (settings.inline_message_bytes + 1)]}
    with pytest.raises(MessageIdTaken):
        store.put_message(
            session,
            other,
            Message(id="m", chat_id=other.id, role=Role.ASSISTANT, parts=huge, created_at=now),
            activity=None,
        )
    assert files(tmp_path / "store-artifacts") == []
    assert store.list_messages(chat.id, 10, None).items[0].parts == original
    assert store.list_messages(other.id, 10, None).items == []


# ---------------------------------------------------------------- outages


def test_store_outage_is_unavailable(app: Container, settings: Settings) -> None:
    session, _ = app.sessions.create(ALICE, NewSession(title="T"))
    items.bind(settings.table_name, "http://127.0.0.1:1", settings.region)
    try:
        with pytest.raises(Unavailable) as info:
            app.sessions.get(ALICE, session.id)
        assert info.value.code == "unavailable"
        with pytest.raises(Unavailable):
            app.sessions.list(ALICE, ListFilter.ALL, None, None)
        with pytest.raises(Unavailable):
            app.sessions.create(ALICE, NewSession(title="during outage"))
    finally:
        items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
    assert app.sessions.get(ALICE, session.id).title == "T"


def test_transaction_outage_is_unavailable(
    app: Container, store: DynamoStore, settings: Settings, monkeypatch: pytest.MonkeyPatch
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
    monkeypatch.setattr(items.SessionItem.Meta, "host", "http://127.0.0.1:1")
    with pytest.raises(Unavailable):
        store.create_chat(session, chat, 10)


@pytest.fixture(autouse=True)
def _rebind_after(settings: Settings) -> Iterator[None]:
    yield
    items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
