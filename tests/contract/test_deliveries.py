"""Webhook delivery ids on both adapters: a first claim wins, a replay before expiry loses, an
expired record is as good as gone, a forgotten one can be claimed again, and of concurrent
claims of one id exactly one wins."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from openagents.store.port import Store

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def test_a_delivery_is_claimed_once_until_it_expires(store: Store) -> None:
    assert store.claim_delivery("d-1", AT, AT + DAY) is True
    assert store.claim_delivery("d-1", AT + timedelta(hours=1), AT + DAY) is False
    assert store.claim_delivery("d-2", AT, AT + DAY) is True  # ids are independent
    assert store.claim_delivery("d-1", AT + DAY, AT + 2 * DAY) is True  # expired: gone
    assert store.claim_delivery("d-1", AT + DAY, AT + 2 * DAY) is False


def test_a_forgotten_delivery_can_be_claimed_again(store: Store) -> None:
    assert store.claim_delivery("d-1", AT, AT + DAY) is True
    store.forget_delivery("d-1")
    store.forget_delivery("never-seen")  # nothing to forget: no error
    assert store.claim_delivery("d-1", AT, AT + DAY) is True


def test_of_concurrent_claims_exactly_one_wins(store: Store) -> None:
    with ThreadPoolExecutor(max_workers=6) as pool:
        won = list(pool.map(lambda _: store.claim_delivery("d-race", AT, AT + DAY), range(6)))
    assert won.count(True) == 1
