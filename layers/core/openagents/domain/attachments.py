"""Attachments of a user message: the rules (pure, no store). A file is an image (png, jpeg,
webp, gif: the type read from its first bytes, never from its name or the type the client
claims) or a UTF-8 text file; a message refers to one by its URL
``/api/sessions/<session>/attachments/<id>`` (an AI SDK ``file`` part), never carries its bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from openagents.domain.errors import InvalidInput, NotFound, PayloadTooLarge

ImageType: TypeAlias = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]

MAX_IMAGE_BYTES = 3_750_000  # Bedrock Converse's cap for one image
MAX_TEXT_BYTES = 256 * 1024  # a text file goes inline: ~64k tokens at most
MAX_MESSAGE_FILES = 10
MAX_MESSAGE_BYTES = 15_000_000  # all the files of one message together
MAX_FILENAME = 200

# text types a client may claim for a text file (anything else text/* is taken as well);
# an empty or generic claim (application/octet-stream) is text/plain
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
        "application/x-ndjson",
    }
)
GENERIC = frozenset({"", "application/octet-stream"})
_ID = re.compile(r"^[0-9a-f]{32}$")
_URL = re.compile(r"^/api/sessions/(?P<session>[^/]+)/attachments/(?P<id>[^/]+)$")
_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$")


@dataclass(frozen=True)
class Attachment:
    """A stored attachment's record (its bytes are kept beside it)."""

    id: str
    user_id: str
    session_id: str
    media_type: str
    size: int
    filename: str | None = None

    @property
    def url(self) -> str:
        return attachment_url(self.session_id, self.id)

    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")


@dataclass(frozen=True)
class AttachmentFile:
    """An attachment with its bytes, as the model step reads it."""

    attachment: Attachment
    data: bytes = field(repr=False)


def attachment_url(session_id: str, attachment_id: str) -> str:
    return f"/api/sessions/{session_id}/attachments/{attachment_id}"


def parse_url(url: str) -> tuple[str, str] | None:
    """``(session_id, attachment_id)`` of an attachment URL; None for any other URL."""
    match = _URL.match(url)
    if match is None or not _ID.match(match["id"]):
        return None
    return match["session"], match["id"]


def valid_id(attachment_id: str) -> bool:
    return bool(_ID.match(attachment_id))


def sniff_image(data: bytes) -> ImageType | None:
    """The image type of ``data`` from its magic number, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _text(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return "\x00" not in text


def _is_text_type(claimed: str) -> bool:
    return claimed.startswith("text/") or claimed in TEXT_TYPES


def media_type_of(data: bytes, claimed: str, *, field_name: str = "mediaType") -> str:
    """The type to store for ``data``: the image type its bytes say, or the claimed text type
    (text/plain for an empty or generic claim) when the bytes are UTF-8. A claim the bytes
    contradict, or bytes that are neither, are refused (400 naming ``field_name``)."""
    claimed = claimed.split(";", 1)[0].strip().lower()
    if claimed == "image/jpg":
        claimed = "image/jpeg"
    if claimed not in GENERIC and not _TYPE.match(claimed):
        raise InvalidInput(f"{field_name} is not a media type", field=field_name)
    image = sniff_image(data)
    if image is not None:
        if claimed not in GENERIC and claimed != image:
            raise InvalidInput(
                f"{field_name} says {claimed} but the file is {image}", field=field_name
            )
        if len(data) > MAX_IMAGE_BYTES:
            raise PayloadTooLarge(f"An image is at most {MAX_IMAGE_BYTES} bytes", field="body")
        return image
    if claimed.startswith("image/"):
        raise InvalidInput(
            f"{field_name} says {claimed} but the file is not a png, jpeg, webp or gif image",
            field=field_name,
        )
    if claimed not in GENERIC and not _is_text_type(claimed):
        raise InvalidInput(
            f"{field_name} {claimed} is not accepted: attach png, jpeg, webp or gif images"
            " or UTF-8 text files",
            field=field_name,
        )
    if len(data) > MAX_TEXT_BYTES:
        raise PayloadTooLarge(f"A text file is at most {MAX_TEXT_BYTES} bytes", field="body")
    if not _text(data):
        raise InvalidInput(
            "The file is neither a png, jpeg, webp or gif image nor UTF-8 text", field="body"
        )
    return "text/plain" if claimed in GENERIC else claimed


def clean_filename(name: str | None) -> str | None:
    """A display name: the last path component, no control characters, at most 200 chars."""
    if name is None:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidInput("filename must not contain control characters", field="filename")
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if len(name) > MAX_FILENAME:
        raise InvalidInput(f"filename is at most {MAX_FILENAME} characters", field="filename")
    return name or None


@dataclass(frozen=True)
class FilePart:
    """An AI SDK ``file`` part of a user message, as it arrived (index among the parts)."""

    index: int
    url: str
    media_type: str
    filename: str | None = None


def check_message_files(
    parts: list[FilePart], records: list[Attachment | None], session: str
) -> None:
    """The message's files against what is stored: each one an attachment of this session
    (another's or a missing one: 404), with the stored type; together under the caps."""
    if len(parts) > MAX_MESSAGE_FILES:
        raise PayloadTooLarge(
            f"A message has at most {MAX_MESSAGE_FILES} files", field="message.parts"
        )
    total = 0
    for part, found in zip(parts, records, strict=True):
        where = f"message.parts.{part.index}"
        if found is None or found.session_id != session:
            raise NotFound("Attachment not found", field=f"{where}.url")
        if part.media_type.lower() != found.media_type:
            raise InvalidInput(
                f"{where}.mediaType is {part.media_type} but the attachment is {found.media_type}",
                field=f"{where}.mediaType",
            )
        total += found.size
    if total > MAX_MESSAGE_BYTES:
        raise PayloadTooLarge(
            f"A message's files are at most {MAX_MESSAGE_BYTES} bytes together",
            field="message.parts",
        )
