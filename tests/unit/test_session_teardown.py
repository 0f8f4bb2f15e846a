"""Deleting a session tears its sandbox down first: a teardown that fails answers 503 with
nothing deleted, and the retry finishes it; the local driver's folders go, links not followed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from openagents.domain.errors import NotFound, Unavailable
from openagents.domain.identity import Identity
from openagents.domain.models import SandboxHandle, Session, SnapshotRef
from openagents.sandbox.local_remains import LocalRemains
from openagents.sandbox.port import SandboxDriver, SandboxError
from openagents.services.sessions import SessionService
from openagents.services.teardown import SandboxTeardown
from openagents.settings import Settings
from openagents.store.port import Store

from tests.support import NoMetrics

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Identity(user_id="alice", username="alice", name="Alice", email="a@example.com")
BOB = Identity(user_id="bob", username="bob", name="Bob", email="b@example.com")
HANDLE = SandboxHandle(driver="local", session_id="s1", generation=2, ref="123")
SNAPSHOT = SnapshotRef(
    driver="local", id="s1/1.tar.zst", session_id="s1", generation=1, size_bytes=1, created_at=T0
)
SESSION = Session(
    id="s1",
    user_id="alice",
    title="T",
    created_at=T0,
    updated_at=T0,
    sandbox=HANDLE,
    snapshot=SNAPSHOT,
)


class OneSession:
    """The store's two calls a delete makes; records what happened, in order."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.session: Session | None = SESSION

    def get_session(self, session_id: str) -> Session | None:
        return self.session if session_id == "s1" else None

    def delete_session(self, session: Session) -> None:
        self.calls.append("store.delete")
        self.session = None


class Driver:
    def __init__(self, calls: list[str], fail: bool = False) -> None:
        self.calls, self.fail = calls, fail

    def stop(self, handle: SandboxHandle) -> None:
        if self.fail:
            raise SandboxError("the sandbox would not stop")
        self.calls.append(f"stop {handle.session_id}/{handle.generation}")

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        self.calls.append(f"delete_snapshot {ref.id}")


class Remains:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def discard(self, session_id: str) -> None:
        self.calls.append(f"discard {session_id}")


def service(store: OneSession, driver: Driver, tmp_path: Path) -> SessionService:
    teardown = SandboxTeardown(cast(SandboxDriver, driver), Remains(store.calls))
    return SessionService(
        cast(Store, store),
        Settings(home=tmp_path),
        lambda: T0,
        lambda: "id",
        NoMetrics(),
        lambda model_id, field: model_id,
        teardown=teardown,
    )


def test_delete_stops_the_sandbox_drops_its_snapshot_and_volumes_first(tmp_path: Path) -> None:
    calls: list[str] = []
    store = OneSession(calls)
    service(store, Driver(calls), tmp_path).delete(ALICE, "s1")
    assert calls == [
        "stop s1/2",
        "delete_snapshot s1/1.tar.zst",
        "discard s1",
        "store.delete",
    ]


def test_a_failed_teardown_deletes_nothing_and_the_retry_finishes(tmp_path: Path) -> None:
    calls: list[str] = []
    store = OneSession(calls)
    with pytest.raises(Unavailable, match="could not be stopped"):
        service(store, Driver(calls, fail=True), tmp_path).delete(ALICE, "s1")
    assert calls == []
    assert store.session is SESSION
    service(store, Driver(calls), tmp_path).delete(ALICE, "s1")
    assert calls[-1] == "store.delete"
    assert store.session is None


def test_another_users_session_is_not_found_and_untouched(tmp_path: Path) -> None:
    calls: list[str] = []
    store = OneSession(calls)
    with pytest.raises(NotFound):
        service(store, Driver(calls), tmp_path).delete(BOB, "s1")
    assert calls == []


def test_local_remains_removes_the_sessions_folders_without_following_links(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    home = tmp_path / "home"
    generation = home / "sandboxes" / "s1" / "1"
    (generation / "workspace").mkdir(parents=True)
    (generation / "workspace.img").write_bytes(b"\0" * 1024)
    (generation / "workspace" / "link").symlink_to(outside)  # planted by the sandbox
    (home / "snapshots" / "s1").mkdir(parents=True)
    (home / "snapshots" / "s1" / "a.tar.zst").write_bytes(b"x")
    (home / "sandboxes" / "s2").mkdir()
    remains = LocalRemains(home)
    remains.discard("s1")
    assert not (home / "sandboxes" / "s1").exists()
    assert not (home / "snapshots" / "s1").exists()
    assert (outside / "keep.txt").read_text() == "host file"
    assert (home / "sandboxes" / "s2").is_dir()  # another session's untouched
    remains.discard("s1")  # idempotent


@pytest.mark.parametrize("bad", ["..", "../s2", "a/b", ""])
def test_local_remains_refuses_an_id_that_is_not_a_folder_name(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(SandboxError, match="invalid session id"):
        LocalRemains(tmp_path).discard(bad)
