"""The session fields this round added, on both adapters: the own branch recorded at create
(never a lifecycle field) and the "ask before running" setting, written with its audit entry."""

from __future__ import annotations

import pytest
from openagents.store.port import Gone, Store

from tests.contract.helpers import entry, new_objects


def test_the_own_branch_is_kept_and_no_lifecycle_write_may_change_it(store: Store) -> None:
    session, chat, created, rate = new_objects("alice", "Own branch")
    session = session.model_copy(update={"own_branch": "agent/mine", "branch": "agent/mine"})
    store.create_session(session, chat, created, claim_title=True, rate=rate)
    stored = store.get_session(session.id)
    assert stored is not None
    assert (stored.own_branch, stored.checkout_branch) == ("agent/mine", "agent/mine")
    assert stored.lifecycle_state is not None
    with pytest.raises(ValueError, match="not lifecycle fields"):
        store.transition(
            session.id,
            expect=frozenset({stored.lifecycle_state}),
            changes={"own_branch": "release"},  # type: ignore[typeddict-unknown-key]
            entry=None,
        )
    again = store.get_session(session.id)
    assert again is not None
    assert again.own_branch == "agent/mine"


def test_ask_before_bash_is_written_with_its_audit_entry(store: Store) -> None:
    session, chat, created, rate = new_objects("alice", "Ask")
    store.create_session(session, chat, created, claim_title=True, rate=rate)
    assert not session.ask_before_bash
    changed = store.set_ask_before_bash(
        session, True, entry(session.id, "session.settings_changed")
    )
    assert changed.ask_before_bash
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.ask_before_bash
    kinds = [e.type for e in store.list_events(session.id, 50, None).items]
    assert "session.settings_changed" in kinds


def test_ask_before_bash_on_an_unknown_session_is_gone(store: Store) -> None:
    session, _, _, _ = new_objects("alice", "Gone")  # never created
    with pytest.raises(Gone):
        store.set_ask_before_bash(session, True, entry(session.id, "session.settings_changed"))
