"""A user message's file parts in the model-visible history (agent/ui.py ``history``): read
through the turn host's reader at the model step, in the parts' order."""

from __future__ import annotations

from openagents.agent.models.port import (
    DocumentBlock,
    ImageBlock,
    JsonValue,
    Message,
    TextBlock,
)
from openagents.agent.ui import FileReader, history
from openagents.domain.attachments import Attachment, AttachmentFile

PNG = b"\x89PNG\r\n\x1a\n" + bytes(8)
URL = "/api/sessions/s1/attachments/" + "a" * 32


def reader(found: dict[str, AttachmentFile]) -> FileReader:
    return found.get


def stored(media: str, data: bytes, name: str | None = None) -> AttachmentFile:
    return AttachmentFile(Attachment("a" * 32, "alice", "s1", media, len(data), name), data)


def user(*parts: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {"id": "m1", "role": "user", "parts": list(parts)}


def test_images_and_text_files_become_blocks_in_order() -> None:
    other = "/api/sessions/s1/attachments/" + "b" * 32
    files = {URL: stored("image/png", PNG), other: stored("text/x-python", b"x = 1\n")}
    message = user(
        {"type": "text", "text": "look"},
        {"type": "file", "mediaType": "image/png", "url": URL},
        {"type": "text", "text": "and"},
        {"type": "file", "mediaType": "text/x-python", "url": other, "filename": "m.py"},
    )
    assert history([message], reader(files)) == (
        Message(
            "user",
            (
                TextBlock("look"),
                ImageBlock("image/png", PNG),
                TextBlock("and"),
                DocumentBlock("m.py", "text/x-python", "x = 1\n"),
            ),
        ),
    )


def test_a_missing_attachment_is_a_note_not_a_failure() -> None:
    message = user({"type": "file", "mediaType": "image/png", "url": URL, "filename": "a.png"})
    [only] = history([message], reader({}))
    assert only.content == (TextBlock("[The attached file a.png is no longer available.]"),)


def test_an_image_record_whose_bytes_are_no_image_is_not_sent_as_one() -> None:
    message = user({"type": "file", "mediaType": "image/png", "url": URL})
    [only] = history([message], reader({URL: stored("image/png", b"not an image")}))
    assert only.content == (TextBlock("[The attached file attachment could not be read.]"),)


def test_text_only_messages_are_as_before() -> None:
    message = user({"type": "text", "text": "a"}, {"type": "text", "text": "b"})
    assert history([message], reader({})) == history([message]) == (Message.user("a\nb"),)
