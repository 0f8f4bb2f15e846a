"""The store contract: every test here runs against both adapters of the store port — the
DynamoDB adapter on moto's server (a table of its own) and the SQLite adapter on a temp file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import botocore.session
import pynamodb.connection.base as pynamodb_base
import pytest
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
from openagents.store.sqlite import SqliteStore

from tests.conftest import dynamodb_table
from tests.support import NoMetrics

ADAPTERS = ["dynamodb", "sqlite"]
TABLES = ("sessions", "chats", "messages", "audit", "profiles", "titles", "counters", "shares")


@dataclass
class Backend:
    """One adapter under test, with a way to see everything it holds."""

    name: str
    settings: Settings
    store: Store

    @property
    def artifacts(self) -> Path:
        return self.settings.artifacts_dir

    def snapshot(self) -> list[str]:
        """Every stored item (DynamoDB) or row (SQLite), sorted: equal snapshots, equal state."""
        if self.name == "dynamodb":
            client = boto3.client(
                "dynamodb",
                endpoint_url=self.settings.dynamodb_endpoint,
                region_name=self.settings.region,
            )
            pages = client.get_paginator("scan").paginate(TableName=self.settings.table_name)
            found = (item for page in pages for item in page["Items"])
            return sorted(json.dumps(item, sort_keys=True) for item in found)
        rows: list[str] = []
        db = sqlite3.connect(self.settings.sqlite_path)
        try:
            for table in TABLES:
                cursor = db.execute(f"SELECT * FROM {table}")  # noqa: S608 - our table names
                rows += [json.dumps([table, *row]) for row in cursor]
        finally:
            db.close()
        return sorted(rows)

    def outbox(self, session_id: str) -> list[Event]:
        """The session's events waiting in the outbox, oldest first: on DynamoDB its outbox
        items (one Query), on SQLite its ``outbox`` rows (the fixture's store drains none)."""
        if self.name == "dynamodb":
            found = OutboxItem.query(
                session_pk(session_id), OutboxItem.sk.startswith(OUTBOX_PREFIX)
            )
            return [to_event(item) for item in found]
        db = sqlite3.connect(self.settings.sqlite_path)
        try:
            rows = db.execute(
                "SELECT user_id, entry FROM outbox WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
        finally:
            db.close()
        return [from_entry(AuditEntry.model_validate_json(entry), user) for user, entry in rows]

    def files(self) -> list[Path]:
        return sorted(p for p in self.artifacts.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def _one_botocore_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed only: PynamoDB opens a botocore session (reloading the service models) per
    transaction; share one."""
    shared = botocore.session.get_session()
    monkeypatch.setattr(pynamodb_base, "get_session", lambda: shared)


@pytest.fixture(params=ADAPTERS)
def backend(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Backend]:
    chosen = settings.model_copy(update={"store": request.param})
    artifacts = FolderArtifactStore(chosen.artifacts_dir)
    store: Store
    if request.param == "dynamodb":
        dynamodb_table(chosen)
        store = DynamoStore(artifacts, chosen.inline_message_bytes)
    else:
        store = SqliteStore(chosen.sqlite_path, artifacts, chosen.inline_message_bytes)
    yield Backend(request.param, chosen, store)
    if isinstance(store, SqliteStore):
        store.db.close()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store


@pytest.fixture
def app(backend: Backend) -> Container:
    """The services on the adapter under test."""
    return composition.build(backend.settings, NoMetrics())
