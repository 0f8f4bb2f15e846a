"""A DynamoDB transaction (``store.transaction.Transaction``, the unit of work on DynamoDB) is
sent in the order its writes were added, two updates of one item are one write, and a write is
asked about by name. (tests/contract drives every refusal of every transaction on DynamoDB.)"""

from __future__ import annotations

from typing import Any

import pytest
from openagents.store.items import ChatItem, MessageClaimItem, SessionItem
from openagents.store.transaction import Transaction
from pynamodb.connection import Connection
from pynamodb.exceptions import CancellationReason, TransactWriteError, VerboseClientError


def refused(*codes: str | None) -> TransactWriteError:
    """A cancelled transaction whose items (in request order) failed with ``codes``."""
    reasons = [CancellationReason(code=code) if code else None for code in codes]
    cause = VerboseClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}},
        "TransactWriteItems",
        cancellation_reasons=reasons,
    )
    return TransactWriteError("cancelled", cause=cause)


class Recording(Connection):
    """A connection that keeps the request instead of sending it."""

    def __init__(self) -> None:
        super().__init__(region="us-east-1")
        self.requests: list[dict[str, Any]] = []

    def dispatch(self, operation_name: str, operation_kwargs: dict[str, Any]) -> dict[str, Any]:
        self.requests.append({operation_name: operation_kwargs})
        return {}


def claim(message_id: str) -> MessageClaimItem:
    return MessageClaimItem("U#1", message_id, chat_id="c", role="user", message_sk="M")


def transaction(connection: Connection | None = None) -> Transaction:
    tx = Transaction(connection or Recording())
    tx.update(SessionItem("S#1", "S"), actions=[SessionItem.title.set("a")], name="session")
    tx.save(claim("M#1"), name="claim")
    tx.delete(ChatItem("S#1", "C#1"), name="chat")
    tx.save(claim("M#2"))  # never asked about
    return tx


def test_a_name_finds_its_write_in_call_order() -> None:
    tx = transaction()
    error = refused("ConditionalCheckFailed", None, None, None)
    assert tx.failed(error, "session")
    assert not tx.failed(error, "claim")
    assert not tx.failed(error, "chat")
    third = refused(None, None, "ConditionalCheckFailed", None)
    assert tx.failed(third, "chat")
    assert not tx.failed(third, "session")


def test_the_request_holds_the_writes_in_call_order() -> None:
    connection = Recording()
    with transaction(connection):
        pass
    (request,) = connection.requests
    items = request["TransactWriteItems"]["TransactItems"]
    assert [next(iter(item)) for item in items] == ["Update", "Put", "Delete", "Put"]
    assert items[1]["Put"]["Item"]["sk"] == {"S": "M#1"}


def test_two_updates_of_one_item_are_one_write_with_both_conditions() -> None:
    connection = Recording()
    with Transaction(connection) as tx:
        tx.update(
            ChatItem("S#1", "C#1"),
            actions=[ChatItem.active_stream_id.set("run")],
            condition=ChatItem.pk.exists(),
            name="chat",
        )
        tx.save(claim("M#1"), name="claim")
        tx.update(
            ChatItem("S#1", "C#1"),
            actions=[ChatItem.message_count.add(1)],
            condition=ChatItem.message_count == 0,
            name="chat",
        )
    items = connection.requests[0]["TransactWriteItems"]["TransactItems"]
    assert len(items) == 2
    update = items[0]["Update"]
    assert update["UpdateExpression"].count("SET") == 1
    assert "ADD" in update["UpdateExpression"]
    assert " AND " in update["ConditionExpression"]
    assert tx.failed(refused("ConditionalCheckFailed", None), "chat")


def test_only_a_failed_condition_counts() -> None:
    tx = transaction()
    assert not tx.failed(refused(None, "TransactionConflict", None, None), "claim")
    assert tx.failed(refused(None, "ConditionalCheckFailed", None, None), "claim")
    assert not tx.failed(refused(), "claim")  # no reasons at all (another failure)


def test_names_are_unique_and_known_and_an_item_is_written_once() -> None:
    tx = transaction()
    with pytest.raises(ValueError, match="two writes named 'claim'"):
        tx.save(claim("M#9"), name="claim")
    with pytest.raises(ValueError, match="no write named 'title'"):
        tx.failed(refused(None, None, None, None), "title")
    with pytest.raises(ValueError, match="two writes of one item"):
        tx.save(SessionItem("S#1", "S"))
