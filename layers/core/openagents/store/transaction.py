"""DynamoDB transactions that replay on conflicts, and the guard that turns store failures
into the domain's ``Unavailable``."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.connection import Connection
from pynamodb.exceptions import PynamoDBException, TransactWriteError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from openagents.domain.errors import Unavailable

BOTOCORE_EXCEPTIONS = (BotoCoreError, ClientError)
P = ParamSpec("P")
R = TypeVar("R")

CONFLICT_RETRIES = 3
TRANSACT_ITEM = {"save": "Put", "update": "Update", "delete": "Delete"}


@dataclass
class _Write:
    kind: str  # save, update, delete
    model: Model
    condition: Condition | None
    actions: list[Action] = field(default_factory=list)


class Transaction:
    """The unit of work on DynamoDB: a TransactWriteItems builder. Writes are added by the
    ports' write functions (a turn's start adds the run's, the claim's and the message's to one
    builder), committed on exit, and replayed when DynamoDB cancels the transaction for a
    conflict with another one in flight (``TransactionConflict``).

    Two updates of one item are one write (DynamoDB allows one per item): their actions are
    joined and their conditions and-ed. A write whose condition the caller asks about is added
    with a ``name``; after a refusal, ``failed(error, name)`` tells whether that write's
    condition failed. The items are sent in the order they were first added (the request is
    built here from each model's public ``get_*_kwargs_from_instance``), and DynamoDB gives the
    cancellation reasons in request order.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._writes: list[_Write] = []
        self._by_key: dict[tuple[str, object, object], int] = {}
        self._names: dict[str, int] = {}  # name → index of its write

    def _record(
        self,
        kind: str,
        model: Model,
        condition: Condition | None,
        actions: Sequence[Action],
        name: str | None,
    ) -> None:
        key = (model.Meta.table_name, getattr(model, "pk", None), getattr(model, "sk", None))
        index = self._by_key.get(key)
        if index is not None:
            write = self._writes[index]
            if kind != "update" or write.kind != "update":
                raise ValueError(f"two writes of one item {key[1:]} in one transaction")
            write.actions += actions
            if condition is not None:
                write.condition = (
                    condition if write.condition is None else write.condition & condition
                )
        else:
            index = len(self._writes)
            self._writes.append(_Write(kind, model, condition, list(actions)))
            self._by_key[key] = index
        if name is not None:
            if self._names.get(name, index) != index:
                raise ValueError(f"two writes named {name!r} in one transaction")
            self._names[name] = index

    def save(
        self, model: Model, condition: Condition | None = None, name: str | None = None
    ) -> None:
        self._record("save", model, condition, [], name)

    def update(
        self,
        model: Model,
        actions: Sequence[Action],
        condition: Condition | None = None,
        name: str | None = None,
    ) -> None:
        self._record("update", model, condition, actions, name)

    def delete(
        self, model: Model, condition: Condition | None = None, name: str | None = None
    ) -> None:
        self._record("delete", model, condition, [], name)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None or not self._writes:
            return
        request = {"TransactItems": [self._item(write) for write in self._writes]}
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                try:
                    self._connection.dispatch("TransactWriteItems", dict(request))
                except BOTOCORE_EXCEPTIONS as error:
                    raise TransactWriteError("Failed to write transaction items", error) from error
                return
            except TransactWriteError as error:
                if attempt == CONFLICT_RETRIES or not conflicted(error):
                    raise
                time.sleep(0.02 * 2**attempt * (1 + random.random()))  # noqa: S311 - jitter

    @staticmethod
    def _item(write: _Write) -> dict[str, Any]:
        model = write.model
        if write.kind == "save":
            kwargs = model.get_save_kwargs_from_instance(condition=write.condition)
        elif write.kind == "update":
            kwargs = model.get_update_kwargs_from_instance(
                actions=write.actions, condition=write.condition
            )
        else:
            kwargs = model.get_delete_kwargs_from_instance(condition=write.condition)
        return {TRANSACT_ITEM[write.kind]: kwargs}

    def failed(self, error: TransactWriteError, name: str) -> bool:
        """Did the write added as ``name`` fail its condition?"""
        if name not in self._names:
            raise ValueError(f"no write named {name!r} in this transaction")
        reasons = error.cancellation_reasons
        position = self._names[name]
        reason = reasons[position] if position < len(reasons) else None
        return reason is not None and reason.code == "ConditionalCheckFailed"


def conflicted(error: TransactWriteError) -> bool:
    return any(
        r is not None and r.code == "TransactionConflict" for r in error.cancellation_reasons
    )


def guard(method: Callable[P, R]) -> Callable[P, R]:
    """Turn unexpected store failures (throttling, outages) into the domain's ``Unavailable``."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except PynamoDBException as exc:
            raise Unavailable(
                f"The session store is unavailable ({exc.cause_response_code})"
            ) from exc

    return wrapper
