"""Attachments count in their user's storage and go with their session (issue 22, 25)."""

from __future__ import annotations

from pathlib import Path

import pytest
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.errors import StorageFull
from openagents.domain.identity import Identity
from openagents.services.attachments import AttachmentFiles, Attachments
from openagents.services.teardown import SandboxTeardown
from openagents.store.sqlite import SqliteStore

from tests.contract.helpers import create

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 200


def test_uploads_count_are_bounded_and_a_deleted_session_takes_them(tmp_path: Path) -> None:
    artifacts = FolderArtifactStore(tmp_path / "artifacts")
    store = SqliteStore(None, artifacts, 300_000, max_user_bytes=1 << 20)
    attachments = Attachments(store, AttachmentFiles(artifacts))
    session = create(store, "alice")
    alice = Identity(user_id="alice")
    stored = attachments.upload(alice, session.id, PNG, "image/png", "a.png")
    assert store.storage_used("alice") == len(PNG)
    store.storage_limit = len(PNG) + 10
    before = sorted(p for p in (tmp_path / "artifacts").rglob("*") if p.is_file())
    with pytest.raises(StorageFull) as full:
        attachments.upload(alice, session.id, PNG, "image/png", "b.png")
    assert (full.value.code, full.value.field) == ("storage_full", "body")
    assert sorted(p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()) == before
    teardown = SandboxTeardown(driver=None, attachments=attachments.discard)  # type: ignore[arg-type]
    teardown(session.model_copy(update={"sandbox": None, "snapshot": None}))
    assert store.storage_used("alice") == 0
    assert not [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert AttachmentFiles(artifacts).record("alice", session.id, stored.id) is None
    teardown(session)  # again: nothing left, nothing given back twice
    assert store.storage_used("alice") == 0
