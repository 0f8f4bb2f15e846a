"""The DynamoDB store's storage count (``store/storage.py``): an ADD on the user's profile item
(``storedBytes``) inside the write's own TransactWriteItems, conditional on the count staying
within the limit; a refused transaction wrote nothing."""

from __future__ import annotations

from pynamodb.exceptions import TransactWriteError

from openagents.store.items import ProfileItem, Table
from openagents.store.keys import profile_key
from openagents.store.storage import StorageFull, admit
from openagents.store.transaction import Transaction

NAME = "storage"


def charge(tx: Transaction, table: Table, user_id: str, delta: int, limit: int | None) -> None:
    """Add ``delta`` to the user's count in ``tx`` (named ``storage``: refused past ``limit``)."""
    if delta == 0:
        return
    admit(0, delta, limit)  # a write larger than the whole limit never fits
    condition = None
    if delta > 0 and limit is not None:
        condition = ProfileItem.stored_bytes.does_not_exist() | (
            ProfileItem.stored_bytes <= limit - delta
        )
    tx.update(
        table[ProfileItem](*profile_key(user_id)),
        actions=[ProfileItem.stored_bytes.add(delta)],
        condition=condition,
        name=NAME if condition is not None else None,
    )


def used(table: Table, user_id: str) -> int:
    try:
        item = table[ProfileItem].get(*profile_key(user_id), consistent_read=True)
    except ProfileItem.DoesNotExist:
        return 0
    return max(0, int(item.stored_bytes or 0))


def refusal(
    tx: Transaction, exc: TransactWriteError, table: Table, user_id: str, delta: int, limit: int
) -> StorageFull | None:
    """``StorageFull`` when the count's condition refused ``tx`` (None when it had none: an
    unbounded write, or one that adds nothing)."""
    try:
        refused = tx.failed(exc, NAME)
    except ValueError:  # no conditional count in this transaction
        return None
    if not refused:
        return None
    return StorageFull(used(table, user_id), delta, limit)
