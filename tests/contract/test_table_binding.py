"""The DynamoDB adapter works on its own table (``items.Table``): two stores built on two
tables, in either order and with the process binding pointing elsewhere, never see each
other's items."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import boto3
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.models import ListFilter, Role
from openagents.store import items
from openagents.store.dynamodb import DynamoStore
from openagents.store.runs import Run, TurnMessage
from openagents.store.runs_dynamodb import DynamoRunStore

from tests.contract.helpers import create, message, new_chat


def _table(endpoint: str) -> items.Table:
    table = items.Table(f"b-{uuid.uuid4().hex[:12]}", endpoint, "us-east-1")
    table.create()
    return table


def test_two_stores_on_two_tables_stay_apart(tmp_path: Path, moto_endpoint: str) -> None:
    first, second = _table(moto_endpoint), _table(moto_endpoint)
    artifacts = FolderArtifactStore(tmp_path / "artifacts")
    one = DynamoStore(artifacts, 300_000, first)
    was = items.Table.of_process()
    items.bind("no-such-table", moto_endpoint, "us-east-1")  # the process binding moves on
    try:
        two = DynamoStore(artifacts, 300_000, second)
        _apart(one, two, moto_endpoint, first)
    finally:
        items.bind(was.name, was.host, was.region)


def _apart(one: DynamoStore, two: DynamoStore, moto_endpoint: str, first: items.Table) -> None:
    runs_one = DynamoRunStore(one)
    mine = create(one)
    theirs = create(two, "bob")
    chat = new_chat(mine.id)
    one.create_chat(mine, chat, 10)

    assert one.get_session(theirs.id) is None
    assert two.get_session(mine.id) is None
    assert [s.id for s in one.list_sessions("alice", ListFilter.ALL, 10, None).items] == [mine.id]
    assert [s.id for s in two.list_sessions("bob", ListFilter.ALL, 10, None).items] == [theirs.id]
    assert runs_one.active_run_id(mine.id, chat.id) is None
    run = Run(
        id="run-bound",
        session_id=mine.id,
        chat_id=chat.id,
        user_id="alice",
        message_id="m-1",
        assistant_message_id="a-1",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    stored = one.get_chat(mine.id, chat.id)
    assert stored is not None
    session = one.get_session(mine.id)
    assert session is not None
    user = message(stored, "m-1", Role.USER, "go")
    assert runs_one.start(run, TurnMessage(session, stored, user, None)).created
    assert runs_one.active_run_id(mine.id, chat.id) == run.id  # the turn's one transaction
    assert [m.id for m in one.list_messages(mine.id, chat.id, 10, None).items] == ["m-1"]
    assert DynamoRunStore(two).get(run.id) is None
    client = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name="us-east-1")
    tables = client.list_tables()["TableNames"]
    assert "no-such-table" not in tables  # nothing went where the process binding points
    ttl = client.describe_time_to_live(TableName=first.name)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == items.TTL_ATTRIBUTE
