"""An acknowledged write to the SQLite store survives kill -9 of the process that made it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.models import ListFilter
from openagents.store.sqlite import SqliteStore

WRITER = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    from openagents.artifacts.folder import FolderArtifactStore
    from openagents.store.sqlite import SqliteStore
    from tests.contract.helpers import create

    path = Path(sys.argv[1])
    store = SqliteStore(path, FolderArtifactStore(path.parent / "artifacts"), 300_000)
    while True:
        session = create(store)  # returns once committed: acknowledged
        print(session.id, flush=True)
    """
)


def start_writer(script: str, path: Path) -> subprocess.Popen[str]:
    """``script`` in a process of its own on the store at ``path``, its stdout piped (what it
    prints: what it was told is written)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "layers/core"), str(root)])}
    return subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
    )


def test_acknowledged_sessions_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "openagents.db"
    writer = start_writer(WRITER, path)
    assert writer.stdout is not None
    acknowledged = [writer.stdout.readline().strip() for _ in range(25)]
    os.kill(writer.pid, signal.SIGKILL)  # mid-stream: more writes were in flight
    writer.wait(timeout=30)
    assert all(acknowledged)

    store = SqliteStore(path, FolderArtifactStore(tmp_path / "artifacts"), 300_000)
    for session_id in acknowledged:
        session = store.get_session(session_id)
        assert session is not None, session_id
        assert len(store.list_chats(session_id)) == 1  # never half-created
        assert [e.type for e in store.list_events(session_id, 10, None).items] == [
            "session.created"
        ]
    listed = store.list_sessions("alice", ListFilter.ALL, 1000, None).items
    assert set(acknowledged) <= {s.id for s in listed}
    for session in listed:  # whatever else committed is whole too
        assert len(store.list_chats(session.id)) == 1


THREADED_WRITER = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from openagents.artifacts.folder import FolderArtifactStore
    from openagents.store.sqlite import SqliteStore
    from tests.contract.helpers import create

    path = Path(sys.argv[1])
    store = SqliteStore(path, FolderArtifactStore(path.parent / "artifacts"), 300_000)
    lock = threading.Lock()

    def write():
        while True:
            session = create(store)  # returns once its batch committed: acknowledged
            with lock:
                print(session.id, flush=True)

    for _ in range(6):
        threading.Thread(target=write, daemon=True).start()
    threading.Event().wait()
    """
)


def test_group_committed_sessions_survive_kill_9(tmp_path: Path) -> None:
    """Six writer threads share commits (group commit): every session one of them was told is
    written survives kill -9, and whatever else committed is whole."""
    path = tmp_path / "openagents.db"
    writer = start_writer(THREADED_WRITER, path)
    assert writer.stdout is not None
    acknowledged = [writer.stdout.readline().strip() for _ in range(120)]
    os.kill(writer.pid, signal.SIGKILL)  # mid-batch: more transactions were queued
    writer.wait(timeout=30)
    assert all(acknowledged)

    store = SqliteStore(path, FolderArtifactStore(tmp_path / "artifacts"), 300_000)
    listed = {s.id: s for s in store.list_sessions("alice", ListFilter.ALL, 10_000, None).items}
    assert set(acknowledged) <= set(listed)
    for session_id in listed:
        assert len(store.list_chats(session_id)) == 1  # never half-created
        assert [e.type for e in store.list_events(session_id, 10, None).items] == [
            "session.created"
        ]


SEGMENT_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime, timedelta
    from pathlib import Path
    from openagents.artifacts.folder import FolderArtifactStore
    from openagents.domain.models import Message, Role
    from openagents.store.runs import Progress, Run, RunUsage, TurnMessage
    from openagents.store.runs_sqlite import SqliteRunStore
    from openagents.store.sqlite import SqliteStore
    from tests.contract.helpers import create

    path = Path(sys.argv[1])
    store = SqliteStore(path, FolderArtifactStore(path.parent / "artifacts"), 300_000)
    runs = SqliteRunStore(store)
    session = create(store)
    chat_id = next(iter(session.chats))
    run = Run(
        id="run-1", session_id=session.id, chat_id=chat_id, user_id=session.user_id,
        message_id="u-1", assistant_message_id="a-1", model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    runs.start(run)
    print(session.id, chat_id, flush=True)
    at = datetime.now(UTC) + timedelta(milliseconds=1)
    parts = []
    step = 0
    while True:  # each step adds a part and writes the parts from it on (a segment)
        step += 1
        kept = len(parts)
        parts.append({"type": "text", "text": f"step {step}", "state": "done"})
        body = {"id": "a-1", "role": "assistant", "parts": list(parts)}
        message = Message(id="a-1", chat_id=chat_id, role=Role.ASSISTANT, parts=body, created_at=at)
        chat = store.get_chat(session.id, chat_id)
        turn = TurnMessage(session, chat, message, None, kept)
        runs.append(run.id, [{"type": "start-step"}], Progress(step, step, RunUsage()), turn)
        print(step, flush=True)  # returned: acknowledged
    """
)


def test_acknowledged_steps_of_a_segmented_message_survive_kill_9(tmp_path: Path) -> None:
    """A turn's steps write its assistant message as segments: after kill -9 the message reads
    back whole with every acknowledged step (and a committed one past it at most)."""
    path = tmp_path / "openagents.db"
    writer = start_writer(SEGMENT_WRITER, path)
    assert writer.stdout is not None
    session_id, chat_id = writer.stdout.readline().split()
    acknowledged = [int(writer.stdout.readline()) for _ in range(60)]
    os.kill(writer.pid, signal.SIGKILL)  # mid-step: the next write was in flight
    writer.wait(timeout=30)
    assert acknowledged == list(range(1, 61))

    store = SqliteStore(path, FolderArtifactStore(tmp_path / "artifacts"), 300_000)
    (message,) = store.list_messages(session_id, chat_id, 10, None).items
    texts = [part["text"] for part in message.parts["parts"]]
    assert texts[:60] == [f"step {n}" for n in range(1, 61)]
    assert texts == [f"step {n}" for n in range(1, len(texts) + 1)]  # nothing torn or doubled
    segments = store.db.read("SELECT COUNT(*) FROM message_segments", ())
    assert segments[0][0] >= 59  # written as segments, not whole
