"""The session's sandbox, snapshot and bundle refs: typed in the domain, stored in the shape
the refs had as plain maps (so items written before the types still load, no migration)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from openagents.domain.models import BundleRef, LifecycleState, SandboxHandle, SnapshotRef
from openagents.store.port import Store

from tests.conftest import dynamodb_client
from tests.contract.conftest import Backend
from tests.contract.helpers import create

PROVISIONING = frozenset({LifecycleState.PROVISIONING})
FIELDS = ("sandbox", "snapshot", "bundle")

# The stored shape, as the untyped code wrote it (``SandboxHandle.to_dict()``,
# ``SnapshotRef.to_dict()`` and the archive's bundle dict).
SANDBOX = {
    "driver": "fargate",
    "sessionId": "sess-1",
    "generation": 3,
    "ref": "arn:aws:ecs:us-east-1:123456789012:task/openagents/abc",
    "endpoint": "http://10.0.0.7:8080",
    "volumeId": None,
}
SNAPSHOT = {
    "driver": "fargate",
    "id": "snap-0123456789abcdef0",
    "sessionId": "sess-1",
    "generation": 2,
    "sizeBytes": 4096,
    "sha256": None,
    "createdAt": "2026-11-30T08:15:00.250000+00:00",
    "manifest": {"kind": "ebs", "volumeId": "vol-1", "sizeGiB": 20},
}
BUNDLE = {
    "key": "bundles/sess-1/3.bundle",
    "generation": 3,
    "sha256": "ab" * 32,
    "sizeBytes": 1234,
    "branch": "feature",
    "head": "0" * 40,
    "upstream": "origin/feature",
    "originHead": "refs/remotes/origin/main",
    "createdAt": "2026-11-30T09:00:00+00:00",
}
OLDER_BUNDLE = {k: v for k, v in BUNDLE.items() if k not in ("upstream", "originHead")}


def stored(backend: Backend, session_id: str) -> dict[str, Any]:
    """The session's ref fields exactly as the adapter keeps them (plain JSON values)."""
    if backend.name == "dynamodb":
        item = _client(backend).get_item(
            TableName=backend.settings.table_name,
            Key={"pk": {"S": f"S#{session_id}"}, "sk": {"S": "SESSION"}},
            ConsistentRead=True,
        )["Item"]
        found = {k: TypeDeserializer().deserialize(v) for k, v in item.items() if k in FIELDS}
        return dict(json.loads(json.dumps(found, default=_number)))
    data = json.loads(_sqlite_row(backend, session_id))
    return {k: data[k] for k in FIELDS if data.get(k) is not None}


def write_raw(backend: Backend, session_id: str, fields: dict[str, Any]) -> None:
    """Write the ref fields as plain maps, bypassing the models (an item of an older build)."""
    if backend.name == "dynamodb":
        names = {f"#{k}": k for k in fields}
        values = {f":{k}": TypeSerializer().serialize(v) for k, v in fields.items()}
        _client(backend).update_item(
            TableName=backend.settings.table_name,
            Key={"pk": {"S": f"S#{session_id}"}, "sk": {"S": "SESSION"}},
            UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in fields),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        return
    data = {**json.loads(_sqlite_row(backend, session_id)), **fields}
    backend.execute("UPDATE sessions SET data = ? WHERE id = ?", (json.dumps(data), session_id))


def test_typed_refs_are_stored_in_the_plain_shape(backend: Backend, store: Store) -> None:
    session = create(store)
    handle = SandboxHandle.model_validate(SANDBOX)
    snapshot = SnapshotRef.model_validate(SNAPSHOT)
    bundle = BundleRef.model_validate(BUNDLE)
    written = store.transition(
        session.id,
        expect=PROVISIONING,
        changes={"sandbox": handle, "snapshot": snapshot, "bundle": bundle},
        entry=None,
    )
    assert (written.sandbox, written.snapshot, written.bundle) == (handle, snapshot, bundle)
    assert stored(backend, session.id) == {
        "sandbox": SANDBOX,
        "snapshot": SNAPSHOT,
        "bundle": BUNDLE,
    }
    again = store.get_session(session.id)
    assert again is not None
    assert (again.sandbox, again.snapshot, again.bundle) == (handle, snapshot, bundle)
    assert again.snapshot is not None
    assert again.snapshot.created_at == datetime(2026, 11, 30, 8, 15, 0, 250000, tzinfo=UTC)


def test_items_written_as_plain_maps_still_load(backend: Backend, store: Store) -> None:
    session = create(store)
    write_raw(
        backend, session.id, {"sandbox": SANDBOX, "snapshot": SNAPSHOT, "bundle": OLDER_BUNDLE}
    )
    loaded = store.get_session(session.id)
    assert loaded is not None
    assert loaded.sandbox == SandboxHandle(
        driver="fargate",
        session_id="sess-1",
        generation=3,
        ref=SANDBOX["ref"],
        endpoint="http://10.0.0.7:8080",
    )
    assert loaded.snapshot is not None
    assert loaded.snapshot.id == "snap-0123456789abcdef0"
    assert loaded.snapshot.size_bytes == 4096
    assert loaded.snapshot.manifest == {"kind": "ebs", "volumeId": "vol-1", "sizeGiB": 20}
    assert loaded.bundle is not None
    assert (loaded.bundle.key, loaded.bundle.generation) == ("bundles/sess-1/3.bundle", 3)
    assert (loaded.bundle.upstream, loaded.bundle.origin_head) == (None, None)
    # clearing them is the ordinary lifecycle write
    cleared = store.transition(
        session.id,
        expect=PROVISIONING,
        changes={"sandbox": None, "snapshot": None, "bundle": None},
        entry=None,
    )
    assert (cleared.sandbox, cleared.snapshot, cleared.bundle) == (None, None, None)
    assert stored(backend, session.id) == {}


def _client(backend: Backend) -> Any:
    return dynamodb_client(backend.settings.dynamodb_endpoint, backend.settings.region)


def _sqlite_row(backend: Backend, session_id: str) -> str:
    (row,) = backend.rows("SELECT data FROM sessions WHERE id = ?", (session_id,))
    return str(row[0])


def _number(value: object) -> object:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(value)
