"""The store contract: every test here runs against the three adapters of the store port — the
DynamoDB adapter on moto (a table of its own), the SQLite adapter on a temp file, and the
in-memory adapter (the SQLite adapter's rules on a database in memory, which the services'
tests can use without a file or a moto table).

On DynamoDB the adapter's requests are botocore's own (built, serialised and signed for the
default AWS endpoint) and moto answers them in this process (``mock_aws``): the same handlers as
moto's server, without a socket, an HTTP server and a thread per request (a third of a request's
cost). The tests here that are not per adapter (the migration, two tables) use the server."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynamodb.connection.base as pynamodb_base
import pytest
from moto import mock_aws
from openagents import composition
from openagents.artifacts.folder import FolderArtifactStore
from openagents.composition import Container
from openagents.domain.models import AuditEntry
from openagents.events import Event, from_entry
from openagents.settings import Settings
from openagents.store.dynamodb import DynamoStore
from openagents.store.items import OutboxItem
from openagents.store.keys import OUTBOX_PREFIX, session_pk
from openagents.store.mapping import to_event
from openagents.store.port import Store
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore

from tests.conftest import botocore_session, dynamodb_client, dynamodb_table, shared_clients
from tests.support import NoMetrics

ADAPTERS = ["dynamodb", "sqlite", "memory"]
TABLES = (
    "sessions",
    "chats",
    "messages",
    "message_segments",
    "audit",
    "profiles",
    "titles",
    "counters",
    "shares",
)


@dataclass
class Backend:
    """One adapter under test, with a way to see everything it holds."""

    name: str
    settings: Settings
    store: Store
    monkeypatch: pytest.MonkeyPatch

    @property
    def artifacts(self) -> Path:
        return self.settings.artifacts_dir

    def snapshot(self) -> list[str]:
        """Every stored item (DynamoDB) or row (SQLite), sorted: equal snapshots, equal state."""
        if self.name == "dynamodb":
            client = dynamodb_client(self.settings.dynamodb_endpoint, self.settings.region)
            pages = client.get_paginator("scan").paginate(TableName=self.settings.table_name)
            found = (item for page in pages for item in page["Items"])
            return sorted(json.dumps(item, sort_keys=True) for item in found)
        rows: list[str] = []
        for table in TABLES:
            kept = self.rows(f"SELECT * FROM {table}")  # noqa: S608 - our table names
            rows += [json.dumps([table, *row]) for row in kept]
        return sorted(rows)

    def execute(self, sql: str, parameters: tuple[object, ...] = ()) -> None:
        """One write to the SQLite database under the store, committed (bypassing the store)."""
        if self.name == "memory":
            assert isinstance(self.store, SqliteStore)
            with self.store.db.transaction() as db:
                db.execute(sql, parameters)
            return
        db = sqlite3.connect(self.settings.sqlite_path)
        try:
            with db:
                db.execute(sql, parameters)
        finally:
            db.close()

    def rows(self, sql: str, parameters: tuple[object, ...] = ()) -> list[Any]:
        """Rows of the SQLite database under the store (in memory: through the store's own)."""
        if self.name == "memory":
            assert isinstance(self.store, SqliteStore)
            return self.store.db.read(sql, parameters)
        db = sqlite3.connect(self.settings.sqlite_path)
        try:
            return db.execute(sql, parameters).fetchall()
        finally:
            db.close()

    def outbox(self, session_id: str) -> list[Event]:
        """The session's events waiting in the outbox, oldest first: on DynamoDB its outbox
        items (one Query), on SQLite its ``outbox`` rows (the fixture's store drains none)."""
        if self.name == "dynamodb":
            found = OutboxItem.query(
                session_pk(session_id), OutboxItem.sk.startswith(OUTBOX_PREFIX)
            )
            return [to_event(item) for item in found]
        rows = self.rows(
            "SELECT user_id, entry FROM outbox WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return [from_entry(AuditEntry.model_validate_json(entry), user) for user, entry in rows]

    def build(self, settings: Settings) -> Container:
        """The services on this adapter, as the composition root builds them from settings
        (settings name the two real adapters: the in-memory one is put in their place)."""
        if self.name == "memory":
            assert isinstance(self.store, SqliteStore)
            memory = self.store

            def stores(*_: object) -> tuple[SqliteStore, SqliteRunStore]:
                return memory, SqliteRunStore(memory)

            self.monkeypatch.setattr(composition, "_stores", stores)
        return composition.build(settings, NoMetrics())

    def files(self) -> list[Path]:
        return sorted(p for p in self.artifacts.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def _one_botocore_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Speed only: PynamoDB opens a botocore session (reloading the service models) per
    connection, and a client per connection; the run shares one session, the test one client
    per endpoint."""
    monkeypatch.setattr(pynamodb_base, "get_session", botocore_session)
    with shared_clients():
        yield


@pytest.fixture(params=ADAPTERS)
def backend(
    request: pytest.FixtureRequest, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    kind = "sqlite" if request.param == "memory" else request.param
    chosen = settings.model_copy(update={"store": kind})
    artifacts = FolderArtifactStore(chosen.artifacts_dir)
    store: Store
    if request.param != "dynamodb":
        path = None if request.param == "memory" else chosen.sqlite_path
        store = SqliteStore(path, artifacts, chosen.inline_message_bytes)
        yield Backend(request.param, chosen, store, monkeypatch)
        store.db.close()
        return
    chosen = chosen.model_copy(update={"dynamodb_endpoint": None})  # AWS's, answered by moto
    with moto_in_process():
        dynamodb_table(chosen)
        store = DynamoStore(artifacts, chosen.inline_message_bytes)
        yield Backend(request.param, chosen, store, monkeypatch)


@contextlib.contextmanager
def moto_in_process() -> Iterator[None]:
    """moto answering AWS requests in this process while it lasts. Its data is the server's
    (one store per process): nothing is reset on the way in or out; boto3's default session
    and the credentials in the environment stay as they are."""
    mock = mock_aws(config={"core": {"reset_boto3_session": False, "mock_credentials": False}})
    mock.start(reset=False)
    try:
        yield
    finally:
        mock.stop(remove_data=False)


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store


@pytest.fixture
def app(backend: Backend) -> Container:
    """The services on the adapter under test."""
    return backend.build(backend.settings)
