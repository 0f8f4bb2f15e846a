"""A DynamoDB transaction's writes are asked about by name: the cancellation reasons come in
PynamoDB's send order (condition checks, deletes, puts, updates), never in call order, and the
names hide that. (tests/contract drives every refusal of every transaction on DynamoDB.)"""

from __future__ import annotations

from typing import Any

import pytest
from openagents.store.transaction import Transaction
from pynamodb.connection import Connection
from pynamodb.exceptions import CancellationReason, TransactWriteError, VerboseClientError


def refused(*codes: str | None) -> TransactWriteError:
    """A cancelled transaction whose items (in send order) failed with ``codes``."""
    reasons = [CancellationReason(code=code) if code else None for code in codes]
    cause = VerboseClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}},
        "TransactWriteItems",
        cancellation_reasons=reasons,
    )
    return TransactWriteError("cancelled", cause=cause)


def transaction() -> Transaction:
    tx = Transaction(Connection(region="us-east-1"))
    item: Any = object()
    tx.update(item, actions=[], name="session")  # sent fourth (updates last)
    tx.save(item, name="claim")  # sent second
    tx.delete(item, name="chat")  # sent first
    tx.save(item)  # sent third, never asked about
    return tx


def test_a_name_finds_its_write_in_send_order() -> None:
    tx = transaction()
    error = refused(None, None, None, "ConditionalCheckFailed")
    assert tx.failed(error, "session")
    assert not tx.failed(error, "claim")
    assert not tx.failed(error, "chat")
    first = refused("ConditionalCheckFailed", None, None, None)
    assert tx.failed(first, "chat")
    assert not tx.failed(first, "session")


def test_only_a_failed_condition_counts() -> None:
    tx = transaction()
    assert not tx.failed(refused(None, "TransactionConflict", None, None), "claim")
    assert tx.failed(refused(None, "ConditionalCheckFailed", None, None), "claim")
    assert not tx.failed(refused(), "claim")  # no reasons at all (another failure)


def test_names_are_unique_and_known() -> None:
    tx = transaction()
    with pytest.raises(ValueError, match="two writes named 'claim'"):
        tx.save(object(), name="claim")
    with pytest.raises(ValueError, match="no write named 'title'"):
        tx.failed(refused(None, None, None, None), "title")
