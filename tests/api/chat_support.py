"""Helpers of the chat-feature API tests: messages posted through the API, and a live turn
put straight into the run store the app reads (as a running agent turn would)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from openagents.artifacts.folder import FolderArtifactStore
from openagents.store.dynamodb import DynamoStore
from openagents.store.runs import Run, RunStatus, RunStore
from openagents.store.runs_dynamodb import DynamoRunStore
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore

from tests.support import Api, HttpApi, LambdaApi

BOT_HEADERS = {"user-agent": "HeadlessChrome/120", "x-amzn-waf-bot-category": "automated_browser"}


def ui(message_id: str, role: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}], **extra}


def post(api: Api, sid: str, chat_id: str, message: dict[str, Any], user: str = "alice") -> None:
    reply = api.post(
        f"/api/sessions/{sid}/chats/{chat_id}/messages", {"message": message}, user=user
    )
    assert reply.status == 200, reply.body


def conversation(
    api: Api, sid: str, chat_id: str, turns: int, prefix: str = "", user: str = "alice"
) -> list[str]:
    """``turns`` user/assistant pairs; their ids, oldest first."""
    ids: list[str] = []
    for n in range(turns):
        for role in ("user", "assistant"):
            message_id = f"{prefix}{role[0]}{n}"
            post(api, sid, chat_id, ui(message_id, role, f"{role} says {n}"), user=user)
            ids.append(message_id)
    return ids


def run_store(api: Api) -> RunStore:
    """The run store on the app's database, on connections of its own (the app's first
    request bound the DynamoDB table)."""
    assert isinstance(api, LambdaApi | HttpApi)
    settings = api.settings
    artifacts = FolderArtifactStore(settings.artifacts_dir)  # runs never write bodies here
    if api.transport == "http":
        return SqliteRunStore(
            SqliteStore(settings.sqlite_path, artifacts, settings.inline_message_bytes)
        )
    return DynamoRunStore(DynamoStore(artifacts, settings.inline_message_bytes))


@contextmanager
def live_turn(api: Api, sid: str, chat_id: str) -> Iterator[None]:
    """A running turn in the chat while the block runs; ended after it."""
    runs = run_store(api)
    run = Run(
        id=f"run-{chat_id}",
        session_id=sid,
        chat_id=chat_id,
        user_id="alice",
        message_id="m-live",
        assistant_message_id="a-live",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    runs.start(run)
    try:
        yield
    finally:
        runs.finish(run.id, RunStatus.ABORTED, at=datetime.now(UTC), retention=timedelta(days=1))
