"""413 ``storage_full`` at the HTTP level (docs/api.md, ``OPENAGENTS_USER_STORAGE_MAX_BYTES``):
the chat post, the message post (insert and an assistant's update) and the attachment upload
refuse a write that would take the user's stored bytes past the bound, name the field, and write
nothing (no message, no run, no stored object) — through both transports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from openagents.settings import Settings

from tests.support import Api, HttpApi, LambdaApi, Reply

LIMIT = 1 << 20  # the smallest bound the settings take
FILL = LIMIT - 60_000  # an image taking all but 60 kB of it
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # a model and an agent engine to name (the turn is refused before either is called)
    return settings.model_copy(
        update={
            "user_storage_max_bytes": LIMIT,
            "models": ("openai/storage-test",),
            "openai_base_url": "http://127.0.0.1:9/v1",
            "agent_function_arn": "arn:aws:lambda:us-east-1:123456789012:function:agent:live",
        }
    )


def image(size: int) -> bytes:
    return PNG + bytes(size - len(PNG))


def upload(api: Api, sid: str, data: bytes, user: str = "alice") -> Reply:
    return api.request(
        "POST",
        f"/api/sessions/{sid}/attachments",
        raw_body=data,
        query={"filename": "shot.png"},
        headers={"content-type": "image/png"},
        user=user,
    )


def nearly_full(api: Api, user: str = "alice") -> tuple[str, str]:
    """A session of ``user``'s, whose storage has 60 kB left."""
    created = api.post("/api/sessions", {"title": "T"}, user=user)
    assert created.status == 201, created.body
    sid, chat_id = created.body["session"]["id"], created.body["chat"]["id"]
    filled = upload(api, sid, image(FILL), user=user)
    assert filled.status == 201, filled.body
    return sid, chat_id


def stored_objects(api: Api) -> list[str]:
    """What the artifact store holds (attachments, large message bodies)."""
    assert isinstance(api, LambdaApi | HttpApi)
    settings = api.settings
    if isinstance(api, LambdaApi):
        assert settings.artifact_bucket is not None
        s3 = boto3.client("s3", region_name=settings.region)
        listed = s3.list_objects_v2(Bucket=settings.artifact_bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))
    folder = settings.artifacts_dir
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def refused(reply: Reply, field: str) -> None:
    assert reply.status == 413, reply.body
    assert reply.error["code"] == "storage_full"
    assert reply.error["field"] == field
    assert "Delete sessions, chats or messages" in reply.error["error"]


def messages(api: Api, sid: str, chat_id: str) -> list[dict[str, Any]]:
    listed = api.get(f"/api/sessions/{sid}/chats/{chat_id}/messages")
    assert listed.status == 200, listed.body
    found: list[dict[str, Any]] = listed.body["messages"]
    return found


def text_message(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def test_an_upload_past_the_bound_is_refused_storing_nothing(api: Api) -> None:
    sid, _ = nearly_full(api)
    before = stored_objects(api)
    refused(upload(api, sid, image(100_000)), "body")
    assert stored_objects(api) == before
    fits = upload(api, sid, image(40_000))  # the refusal took none of the 60 kB left
    assert fits.status == 201, fits.body
    after = stored_objects(api)
    assert set(before) < set(after)  # the accepted one is stored
    refused(upload(api, sid, image(40_000)), "body")  # 20 kB left now
    assert stored_objects(api) == after
    # the bound is the user's: another user's upload is not refused
    other, _ = nearly_full(api, user="bob")
    assert upload(api, other, image(1_000), user="bob").status == 201


def test_a_message_past_the_bound_is_refused_writing_nothing(api: Api) -> None:
    sid, chat_id = nearly_full(api)
    path = f"/api/sessions/{sid}/chats/{chat_id}/messages"
    before = stored_objects(api)
    big = text_message("u-big", "user", "x" * 100_000)
    refused(api.post(path, {"message": big}), "message")
    assert messages(api, sid, chat_id) == []
    assert stored_objects(api) == before
    # an assistant's message, then its update past the bound: the stored one stays
    small = text_message("a-1", "assistant", "short answer")
    assert api.post(path, {"message": small}).body["status"] == "inserted"
    grown = text_message("a-1", "assistant", "y" * 100_000)
    refused(api.post(path, {"message": grown}), "message")
    assert messages(api, sid, chat_id) == [small]
    assert stored_objects(api) == before
    # what fits is still stored
    fits = text_message("u-small", "user", "hello")
    assert api.post(path, {"message": fits}).body["status"] == "inserted"
    assert [m["id"] for m in messages(api, sid, chat_id)] == ["a-1", "u-small"]


def test_a_turn_past_the_bound_is_refused_starting_nothing(api: Api) -> None:
    sid, chat_id = nearly_full(api)
    before = stored_objects(api)
    message = text_message("m-turn", "user", "z" * 100_000)
    body = {"sessionId": sid, "chatId": chat_id, "message": message}
    refused(api.post("/api/chat", body), "message")
    assert messages(api, sid, chat_id) == []
    assert stored_objects(api) == before
    assert api.get(f"/api/chat/{chat_id}/stream", query={"wait": "0"}).status == 204  # no run
    runs = api.get(f"/api/sessions/{sid}/runs")
    assert runs.status == 200, runs.body
    assert runs.body["runs"] == []


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/api/chat", "post"),
        ("/api/sessions/{session_id}/chats/{chat_id}/messages", "post"),
        ("/api/sessions/{session_id}/attachments", "post"),
    ],
)
def test_the_openapi_document_lists_413_for_the_writes(path: str, method: str) -> None:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert "413" in document["paths"][path][method]["responses"]
