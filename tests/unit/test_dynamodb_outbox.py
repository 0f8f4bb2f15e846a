"""The moto runtime's pipe: the table's stream drained to the bus as the pipe does (INSERTs of
outbox items only, in order), so the DynamoDB adapter's events reach the local rules."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import boto3
from moto.server import ThreadedMotoServer
from openagents.events import Event
from openagents.local.dynamodb import free_port
from openagents.local.dynamodb_outbox import StreamDrain

TABLE = "outbox-test"


def _client(service: str, port: int) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _put(client: Any, sk: str, name: str) -> None:
    detail = {"name": name, "time": "2026-01-01T00:00:00+00:00", "type": "session.created"}
    client.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": TABLE,
                    "Item": {
                        "pk": {"S": "S#s1"},
                        "sk": {"S": sk},
                        "event": {"S": json.dumps(detail)},
                    },
                }
            }
        ]
    )


def test_outbox_items_reach_the_bus_in_order_and_nothing_else() -> None:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        dynamodb = _client("dynamodb", port)
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        published: list[Event] = []

        def publish(events: Sequence[Event]) -> None:
            published.extend(events)

        streams = _client("dynamodbstreams", port)
        drain = StreamDrain(dynamodb, streams, TABLE, publish)
        drain.enable()
        _put(dynamodb, "O#2026-01-01T00:00:00#a", "Session Created")
        _put(dynamodb, "E#2026-01-01T00:00:00#a", "not an event")
        _put(dynamodb, "O#2026-01-01T00:00:01#b", "Session Renamed")
        assert drain.drain() == 2
        assert [e.detail_type for e in published] == ["Session Created", "Session Renamed"]
        assert drain.drain() == 0  # each record once
    finally:
        server.stop()
