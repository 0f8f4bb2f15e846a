"""A store as the code before issue 23's reshaping wrote it, and what that code read back.

``python -m tests.store_compat.written`` (run once, at the commit before the reshaping) wrote
``v5/``: the SQLite database as SQL (``sqlite.sql``), the DynamoDB table's items as the service
returns them (``dynamodb.json``), the large message bodies (``artifacts/``) and ``expected.json``
(``observe`` of that store). ``test_old_store.py`` loads them and reads them with today's code.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    ListFilter,
    Message,
    Preferences,
    Role,
    Session,
)
from openagents.domain.runs import Progress, Run, RunStatus, RunUsage
from openagents.store.port import Activity, RateWindow, Store
from openagents.store.runs import RunStore, TurnMessage, run_to_json

HERE = Path(__file__).parent / "v5"
INLINE_BYTES = 2_000  # small, so one message body lives in the artifact store
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
USER = "alice"


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def text_message(chat_id: str, message_id: str, role: Role, text: str, when: int) -> Message:
    return Message(
        id=message_id,
        chat_id=chat_id,
        role=role,
        parts={"id": message_id, "role": role.value, "parts": [{"type": "text", "text": text}]},
        created_at=at(when),
    )


def write(store: Store, runs: RunStore) -> None:
    """Every kind of item the store holds, with fixed ids and times."""
    store.put_preferences(USER, Preferences(default_model_id="scripted/default"))
    chat = Chat(id="c1", session_id="s1", title="New chat", created_at=T0, updated_at=T0)
    session = Session(
        id="s1",
        user_id=USER,
        title="Fix the parser",
        repo_owner="acme",
        repo_name="widgets",
        created_at=T0,
        updated_at=T0,
        chats={"c1": ChatMark(created_at=T0, updated_at=T0)},
    )
    created = AuditEntry(id="e1", session_id="s1", at=T0, type="session.created", detail={})
    rate = RateWindow(action="session.create", at=T0, seconds=3600, limit=100)
    store.create_session(session, chat, created, claim_title=True, rate=rate)
    session = store.get_session("s1") or session
    second = Chat(id="c2", session_id="s1", title="New chat", created_at=at(1), updated_at=at(1))
    store.create_chat(session, second, 10)
    session = store.get_session("s1") or session
    activity = Activity(at=at(2), hibernate_after=at(2 + 3600))
    store.put_message(
        session, chat, text_message("c1", "m1", Role.USER, "Parse it", 2), activity=activity
    )
    chat = store.get_chat("s1", "c1") or chat
    store.put_message(
        session, chat, text_message("c1", "m2", Role.ASSISTANT, "Parsed.", 3), activity=None
    )
    big = text_message("c1", "m3", Role.ASSISTANT, "x" * (INLINE_BYTES * 3), 4)
    store.put_message(session, store.get_chat("s1", "c1") or chat, big, activity=None)
    renamed = AuditEntry(id="e2", session_id="s1", at=at(5), type="session.renamed", detail={})
    session = store.rename_session(session, "Fix the parser again", renamed)
    store.title_chat(store.get_chat("s1", "c2") or second, "A generated title")
    store.share_chat(store.get_chat("s1", "c1") or chat, "share-1")
    store.claim_delivery("delivery-1", at(6), at(6 + 86_400 * 365 * 50))
    store.mark_read(session, "c1", at(7))
    store.append_entry(
        AuditEntry(id="e3", session_id="s1", at=at(8), type="test.event", detail={"n": 1})
    )

    c2 = store.get_chat("s1", "c2") or second
    session = store.get_session("s1") or session
    run = Run(
        id="r1",
        session_id="s1",
        chat_id="c2",
        user_id=USER,
        message_id="m4",
        assistant_message_id="m5",
        model_id="scripted/default",
        started_at=at(9),
    )
    user = text_message("c2", "m4", Role.USER, "Second chat", 9)
    runs.start(run, TurnMessage(session, c2, user, Activity(at=at(9), hibernate_after=at(3609))))
    answer = text_message("c2", "m5", Role.ASSISTANT, "Answered", 10)
    c2 = store.get_chat("s1", "c2") or c2
    runs.append(
        "r1",
        [{"type": "start", "messageId": "m5"}, {"type": "text-delta", "id": "t", "delta": "A"}],
        Progress(steps=1, model_calls=1, usage=RunUsage(input_tokens=10, output_tokens=2)),
        TurnMessage(session, c2, answer, None),
    )
    runs.finish("r1", RunStatus.COMPLETED, at=at(11), retention=timedelta(days=36_500))
    live = Run(
        id="r2",
        session_id="s1",
        chat_id="c1",
        user_id=USER,
        message_id="m6",
        assistant_message_id="m7",
        model_id="scripted/default",
        started_at=at(12),
    )
    c1 = store.get_chat("s1", "c1") or chat
    more = text_message("c1", "m6", Role.USER, "More", 12)
    runs.start(live, TurnMessage(session, c1, more, None))


def observe(store: Store, runs: RunStore) -> dict[str, object]:
    """What the store answers about everything ``write`` wrote, as JSON."""

    def dump(value: object) -> object:
        if isinstance(value, Run):
            return run_to_json(value)
        dumper = getattr(value, "model_dump", None)
        return dumper(mode="json") if dumper else value

    chats = store.list_chats("s1")
    return {
        "user": {
            "preferences": dump(store.get_user(USER).preferences),
            "archived": store.get_user(USER).archived_count,
        },
        "titles": sorted(store.used_titles(USER)),
        "session": dump(store.get_session("s1")),
        "listed": [dump(s) for s in store.list_sessions(USER, ListFilter.ALL, 10, None).items],
        "chats": [dump(c) for c in chats],
        "chat_session": store.chat_session(USER, "c2"),
        "messages": {
            c.id: [dump(m) for m in store.list_messages("s1", c.id, 50, None).items] for c in chats
        },
        "events": [dump(e) for e in store.list_events("s1", 50, None).items],
        "shared": dump(store.shared_chat("share-1")),
        "runs": [dump(r) for r in runs.list_for_session("s1", 10, None).items],
        "run_events": [[e.seq, e.chunk] for e in runs.events("r1", 0)],
        "active": [runs.active_run_id("s1", "c1"), runs.active_run_id("s1", "c2")],
        "latest": dump(runs.latest("s1", "c2")),
    }


def _stores(kind: str, root: Path, endpoint: str | None, table: str) -> tuple[Store, RunStore]:
    from openagents.artifacts.folder import FolderArtifactStore

    artifacts = FolderArtifactStore(root / "artifacts")
    if kind == "sqlite":
        from openagents.store.runs_sqlite import SqliteRunStore
        from openagents.store.sqlite import SqliteStore

        sqlite_store = SqliteStore(root / "openagents.db", artifacts, INLINE_BYTES)
        return sqlite_store, SqliteRunStore(sqlite_store)
    from openagents.store import items
    from openagents.store.dynamodb import DynamoStore
    from openagents.store.runs_dynamodb import DynamoRunStore

    items.bind(table, endpoint, "us-east-1")
    items.create_table()
    dynamo_store = DynamoStore(artifacts, INLINE_BYTES)
    return dynamo_store, DynamoRunStore(dynamo_store)


def main() -> None:  # pragma: no cover - run once, by hand
    import logging

    import boto3
    from moto.server import ThreadedMotoServer
    from openagents.local.dynamodb import free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        if HERE.exists():
            shutil.rmtree(HERE)
        HERE.mkdir(parents=True)
        expected: dict[str, object] = {}
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for kind in ("sqlite", "dynamodb"):
                store, runs = _stores(kind, root / kind, endpoint, "written")
                write(store, runs)
                expected[kind] = observe(store, runs)
                shutil.copytree(root / kind / "artifacts", HERE / "artifacts" / kind)
            db = sqlite3.connect(root / "sqlite" / "openagents.db")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            dump = "\n".join(db.iterdump())
            db.close()
            (HERE / "sqlite.sql").write_text(f"{dump}\nPRAGMA user_version = {version};\n")
            client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
            found = client.scan(TableName="written")["Items"]
            ordered = sorted(found, key=lambda item: json.dumps(item, sort_keys=True))
            (HERE / "dynamodb.json").write_text(json.dumps(ordered, indent=1, sort_keys=True))
        (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True))
    finally:
        server.stop()
    print(f"wrote {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
