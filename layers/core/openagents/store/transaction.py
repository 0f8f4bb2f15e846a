"""DynamoDB transactions that replay on conflicts, and the guard that turns store failures
into the domain's ``Unavailable``."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from pynamodb.connection import Connection
from pynamodb.exceptions import PynamoDBException, TransactWriteError
from pynamodb.transactions import TransactWrite

from openagents.domain.errors import Unavailable

P = ParamSpec("P")
R = TypeVar("R")

CONFLICT_RETRIES = 3
KIND_ORDER = ("condition_check", "delete", "save", "update")  # how PynamoDB sends them


class Transaction:
    """Collects a transaction's writes, commits them on exit, and replays them when DynamoDB
    cancels the transaction for a conflict with another one in flight (``TransactionConflict``).

    A write whose condition the caller asks about is added with a ``name``; after a refusal,
    ``failed(error, name)`` tells whether that write's condition failed. (PynamoDB sends the
    writes grouped by kind — condition checks, deletes, puts, updates — so the cancellation
    reasons come in that order, not in call order; the names hide it.)
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._names: dict[str, int] = {}  # name → index in call order

    def _record(self, kind: str, name: str | None, args: tuple[Any, ...], kw: Any) -> None:
        if name is not None:
            if name in self._names:
                raise ValueError(f"two writes named {name!r} in one transaction")
            self._names[name] = len(self._ops)
        self._ops.append((kind, args, kw))

    def save(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        self._record("save", name, args, kwargs)

    def update(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        self._record("update", name, args, kwargs)

    def delete(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        self._record("delete", name, args, kwargs)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            return
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                with TransactWrite(connection=self._connection) as write:
                    for kind, args, kwargs in self._ops:
                        getattr(write, kind)(*args, **kwargs)
                return
            except TransactWriteError as error:
                if attempt == CONFLICT_RETRIES or not conflicted(error):
                    raise
                time.sleep(0.02 * 2**attempt * (1 + random.random()))  # noqa: S311 - jitter

    def failed(self, error: TransactWriteError, name: str) -> bool:
        """Did the write added as ``name`` fail its condition?"""
        if name not in self._names:
            raise ValueError(f"no write named {name!r} in this transaction")
        order = sorted(range(len(self._ops)), key=lambda i: KIND_ORDER.index(self._ops[i][0]))
        reasons = error.cancellation_reasons
        position = order.index(self._names[name])
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
