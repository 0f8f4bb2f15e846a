"""Attachments of a user message (issue 25): upload (the type sniffed from the bytes, the
caps), read back, and the chat post's check of a message's file parts — through both
transports (S3 on moto for AWS mode, the folder on one machine)."""

from __future__ import annotations

from typing import Any

import pytest
from openagents.domain.attachments import MAX_IMAGE_BYTES, MAX_MESSAGE_FILES, MAX_TEXT_BYTES

from tests.support import Api, HttpApi, Reply

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(32)
JPEG = b"\xff\xd8\xff\xe0" + bytes(32)
GIF = b"GIF89a" + bytes(32)
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(32)


def new_session(api: Api, user: str = "alice") -> tuple[str, str]:
    created = api.post("/api/sessions", {"title": "T"}, user=user)
    assert created.status == 201, created.body
    return created.body["session"]["id"], created.body["chat"]["id"]


def upload(
    api: Api,
    sid: str,
    data: bytes,
    media: str,
    filename: str | None = None,
    user: str = "alice",
) -> Reply:
    query = {"filename": filename} if filename is not None else None
    return api.request(
        "POST",
        f"/api/sessions/{sid}/attachments",
        raw_body=data,
        query=query,
        headers={"content-type": media},
        user=user,
    )


def turn(
    api: Api, sid: str, chat_id: str, parts: list[dict[str, Any]], user: str = "alice"
) -> Reply:
    message = {"id": "m-1", "role": "user", "parts": parts}
    return api.post(
        "/api/chat", {"sessionId": sid, "chatId": chat_id, "message": message}, user=user
    )


def file_part(uploaded: Reply, **override: Any) -> dict[str, Any]:
    body = uploaded.body
    return {"type": "file", "mediaType": body["mediaType"], "url": body["url"], **override}


def no_messages(api: Api, sid: str, chat_id: str, user: str = "alice") -> None:
    listed = api.get(f"/api/sessions/{sid}/chats/{chat_id}/messages", user=user)
    assert listed.status == 200, listed.body
    assert listed.body["messages"] == []


@pytest.mark.parametrize(
    ("data", "claimed", "stored"),
    [
        (PNG, "image/png", "image/png"),
        (JPEG, "image/jpg", "image/jpeg"),
        (GIF, "application/octet-stream", "image/gif"),
        (WEBP, "", "image/webp"),
    ],
)
def test_an_image_is_stored_with_the_type_its_bytes_say(
    api: Api, data: bytes, claimed: str, stored: str
) -> None:
    sid, _ = new_session(api)
    uploaded = upload(api, sid, data, claimed, filename="C:\\shots\\shot.bin")
    assert uploaded.status == 201, uploaded.body
    body = uploaded.body
    assert body["mediaType"] == stored
    assert body["size"] == len(data)
    assert body["filename"] == "shot.bin"  # the last path component only
    assert body["url"] == f"/api/sessions/{sid}/attachments/{body['id']}"


def test_a_text_file_reads_back_as_plain_text(api: Api) -> None:
    sid, _ = new_session(api)
    text = "# Notes\n<script>alert(1)</script> ünïcode\n"
    uploaded = upload(api, sid, text.encode(), "text/markdown", filename="notes.md")
    assert uploaded.status == 201, uploaded.body
    assert uploaded.body["mediaType"] == "text/markdown"
    read = api.get(uploaded.body["url"])
    assert read.status == 200
    assert read.headers["content-type"] == "text/plain; charset=utf-8"  # never HTML
    assert read.headers["x-content-type-options"] == "nosniff"
    assert read.body == text
    # another user's session and attachment are missing ones
    assert api.get(uploaded.body["url"], user="mallory").status == 404


def test_an_image_reads_back_as_its_bytes(http_api: HttpApi) -> None:
    sid, _ = new_session(http_api)
    uploaded = upload(http_api, sid, PNG, "image/png")
    token = http_api.token("alice")
    read = http_api.client.get(uploaded.body["url"], headers={"authorization": f"Bearer {token}"})
    assert read.status_code == 200
    assert read.headers["content-type"] == "image/png"
    assert read.content == PNG
    missing = uploaded.body["url"][:-1] + ("0" if uploaded.body["url"][-1] != "0" else "1")
    gone = http_api.client.get(missing, headers={"authorization": f"Bearer {token}"})
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("data", "claimed", "field"),
    [
        (PNG, "image/jpeg", "mediaType"),  # the claim contradicts the bytes
        (PNG, "text/plain", "mediaType"),
        (b"plain words", "image/png", "mediaType"),  # claims an image, is none
        (b"plain words", "application/pdf", "mediaType"),  # not a type we take
        (b"plain words", "not a type", "mediaType"),
        (b"\xff\xfe\x00bad utf-8", "text/plain", "body"),  # neither an image nor UTF-8
        (b"nul\x00inside", "text/plain", "body"),
        (b"", "text/plain", "body"),
    ],
)
def test_refused_uploads_name_the_field(api: Api, data: bytes, claimed: str, field: str) -> None:
    sid, _ = new_session(api)
    refused = upload(api, sid, data, claimed)
    assert refused.status == 400, refused.body
    assert refused.error["field"] == field


def test_uploads_over_the_caps_are_413_on_body(api: Api) -> None:
    sid, _ = new_session(api)
    big_text = upload(api, sid, b"a" * (MAX_TEXT_BYTES + 1), "text/plain")
    assert big_text.status == 413, big_text.body
    assert big_text.error["field"] == "body"
    big_image = upload(api, sid, PNG + bytes(MAX_IMAGE_BYTES), "image/png")
    assert big_image.status == 413
    assert big_image.error["field"] == "body"
    # an image just under the cap passes the body limit and the cap
    fits = upload(api, sid, PNG + bytes(MAX_IMAGE_BYTES - len(PNG)), "image/png")
    assert fits.status == 201, fits.body


def test_an_upload_to_another_users_session_is_404(api: Api) -> None:
    sid, _ = new_session(api)
    refused = upload(api, sid, PNG, "image/png", user="mallory")
    assert refused.status == 404
    assert upload(api, "no-such-session", PNG, "image/png").status == 404


def test_a_filename_with_control_characters_is_refused(api: Api) -> None:
    sid, _ = new_session(api)
    refused = upload(api, sid, PNG, "image/png", filename="a\nb.png")
    assert refused.status == 400
    assert refused.error["field"] == "filename"


# --- the chat post's check of a message's file parts ---------------------------------------


def test_a_file_part_of_another_users_attachment_is_404_and_nothing_is_written(
    api: Api,
) -> None:
    theirs, _ = new_session(api, user="mallory")
    uploaded = upload(api, theirs, PNG, "image/png", user="mallory")
    assert uploaded.status == 201
    sid, chat_id = new_session(api)
    # mallory's URL, and the same attachment id under alice's own session: both missing
    own_url = f"/api/sessions/{sid}/attachments/{uploaded.body['id']}"
    for url in (uploaded.body["url"], own_url):
        refused = turn(api, sid, chat_id, [file_part(uploaded, url=url)])
        assert refused.status == 404, refused.body
        assert refused.error["field"] == "message.parts.0.url"
    no_messages(api, sid, chat_id)


def test_a_file_part_of_another_session_of_the_same_user_is_404(api: Api) -> None:
    other, _ = new_session(api)
    uploaded = upload(api, other, PNG, "image/png")
    sid, chat_id = new_session(api)
    refused = turn(api, sid, chat_id, [{"type": "text", "text": "hi"}, file_part(uploaded)])
    assert refused.status == 404
    assert refused.error["field"] == "message.parts.1.url"
    no_messages(api, sid, chat_id)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"mediaType": "image/gif"}, "message.parts.0.mediaType"),  # not what was stored
        ({"mediaType": 3}, "message.parts.0.mediaType"),
        ({"url": "data:image/png;base64,iVBORw0KGgo="}, "message.parts.0.url"),  # no bytes
        ({"url": "https://example.com/a.png"}, "message.parts.0.url"),
        ({"filename": ["x"]}, "message.parts.0.filename"),
    ],
)
def test_a_bad_file_part_is_400_naming_it(api: Api, override: dict[str, Any], field: str) -> None:
    sid, chat_id = new_session(api)
    uploaded = upload(api, sid, PNG, "image/png")
    refused = turn(api, sid, chat_id, [file_part(uploaded, **override)])
    assert refused.status == 400, refused.body
    assert refused.error["field"] == field
    no_messages(api, sid, chat_id)


def test_too_many_files_in_a_message_is_413(api: Api) -> None:
    sid, chat_id = new_session(api)
    uploaded = upload(api, sid, PNG, "image/png")
    parts = [file_part(uploaded)] * (MAX_MESSAGE_FILES + 1)
    refused = turn(api, sid, chat_id, parts)
    assert refused.status == 413
    assert refused.error["field"] == "message.parts"
    no_messages(api, sid, chat_id)


def test_a_message_over_the_total_cap_is_413(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from openagents.domain import attachments

    monkeypatch.setattr(attachments, "MAX_MESSAGE_BYTES", len(PNG) * 2)
    sid, chat_id = new_session(api)
    uploaded = upload(api, sid, PNG, "image/png")
    refused = turn(api, sid, chat_id, [file_part(uploaded)] * 3)
    assert refused.status == 413
    assert refused.error["field"] == "message.parts"
    no_messages(api, sid, chat_id)
