"""Attachments of user messages: upload (bytes to the artifact store, the type sniffed), read
back (the web app's thumbnails, the model step), and the check of a message's ``file`` parts
before the message is stored.

Keys: ``attachments/<user>/<session>/<id>`` holds the bytes and ``…/<id>.json`` the record
(type, size, name); the record is written last, so an attachment exists once both are there.
The user's id is part of the key, so another user's URL names nothing they can read."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from openagents.artifacts import ArtifactStore
from openagents.domain.attachments import (
    Attachment,
    AttachmentFile,
    FilePart,
    attachment_url,
    check_message_files,
    clean_filename,
    media_type_of,
    parse_url,
    valid_id,
)
from openagents.domain.errors import InvalidInput, NotFound, SessionArchived, StorageFull
from openagents.domain.identity import Identity
from openagents.domain.models import Session, SessionStatus
from openagents.services.sessions import owned
from openagents.store.port import SessionStore, UserStore

__all__ = ["AttachmentFiles", "Attachments", "file_parts"]


@runtime_checkable
class Listing(Protocol):
    def keys(self, prefix: str) -> list[str]: ...


class AttachmentStore(SessionStore, UserStore, Protocol):
    """The sessions an attachment belongs to, and the user's storage it counts in."""


class AttachmentFiles:
    """The attachments' bytes and records in the artifact store (folder or S3)."""

    def __init__(self, artifacts: ArtifactStore) -> None:
        self._artifacts = artifacts

    @staticmethod
    def _folder(user_id: str, session_id: str) -> str:
        return f"attachments/{quote(user_id, safe='')}/{quote(session_id, safe='')}/"

    @classmethod
    def _key(cls, user_id: str, session_id: str, attachment_id: str) -> str:
        return f"{cls._folder(user_id, session_id)}{attachment_id}"

    def discard(self, user_id: str, session_id: str) -> int:
        """Delete the session's attachments (each record first, so a half-deleted one no
        longer exists, then its bytes); the bytes their records counted."""
        if not isinstance(self._artifacts, Listing):
            return 0
        keys = self._artifacts.keys(self._folder(user_id, session_id))
        freed = 0
        for key in (k for k in keys if k.endswith(".json")):
            found = self.record(user_id, session_id, key.rsplit("/", 1)[-1][: -len(".json")])
            self._artifacts.delete(key)
            freed += found.size if found is not None else 0
        for key in (k for k in keys if not k.endswith(".json")):
            self._artifacts.delete(key)
        return freed

    def put(self, attachment: Attachment, data: bytes) -> None:
        key = self._key(attachment.user_id, attachment.session_id, attachment.id)
        self._artifacts.put(key, data)
        record = {
            "mediaType": attachment.media_type,
            "size": attachment.size,
            "filename": attachment.filename,
        }
        self._artifacts.put(f"{key}.json", json.dumps(record).encode())

    def record(self, user_id: str, session_id: str, attachment_id: str) -> Attachment | None:
        if not valid_id(attachment_id):
            return None
        key = self._key(user_id, session_id, attachment_id)
        try:
            data: dict[str, Any] = json.loads(self._artifacts.get(f"{key}.json"))
        except FileNotFoundError:
            return None
        return Attachment(
            attachment_id,
            user_id,
            session_id,
            str(data["mediaType"]),
            int(data["size"]),
            data.get("filename"),
        )

    def read(self, user_id: str, url: str) -> AttachmentFile | None:
        """The attachment a message's file part names, with its bytes; None when it names
        none of ``user_id``'s."""
        parsed = parse_url(url)
        if parsed is None:
            return None
        found = self.record(user_id, *parsed)
        if found is None:
            return None
        try:
            data = self._artifacts.get(self._key(user_id, found.session_id, found.id))
        except FileNotFoundError:
            return None
        return AttachmentFile(found, data)


def file_parts(message: Mapping[str, object]) -> list[FilePart]:
    """The ``file`` parts of a UI message, each with a string ``url`` and ``mediaType`` (400
    naming the part's field otherwise)."""
    parts = message.get("parts")
    found: list[FilePart] = []
    if not isinstance(parts, Sequence):
        return found
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("type") != "file":
            continue
        where = f"message.parts.{index}"
        url, media_type, filename = part.get("url"), part.get("mediaType"), part.get("filename")
        if not isinstance(url, str) or parse_url(url) is None:
            raise InvalidInput(
                f"{where}.url must be an attachment's URL (POST"
                " /api/sessions/{id}/attachments answers it)",
                field=f"{where}.url",
            )
        if not isinstance(media_type, str):
            raise InvalidInput(f"{where}.mediaType must be a string", field=f"{where}.mediaType")
        if filename is not None and not isinstance(filename, str):
            raise InvalidInput(f"{where}.filename must be a string", field=f"{where}.filename")
        found.append(FilePart(index, url, media_type, filename))
    return found


class Attachments:
    """Upload and read attachments of the caller's own sessions."""

    def __init__(
        self, store: AttachmentStore, files: AttachmentFiles, ids: Callable[[], str] | None = None
    ) -> None:
        self._store, self._files = store, files
        self._ids = ids or (lambda: uuid.uuid4().hex)

    def upload(
        self,
        identity: Identity,
        session_id: str,
        data: bytes,
        claimed: str,
        filename: str | None,
    ) -> Attachment:
        """Store ``data`` (its type sniffed: ``media_type_of``) for the caller's session."""
        session = owned(self._store.get_session(session_id), identity)
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        name = clean_filename(filename)
        if not data:
            raise InvalidInput("The file is empty", field="body")
        media_type = media_type_of(data, claimed, field_name="mediaType")
        attachment = Attachment(
            self._ids(), identity.user_id, session.id, media_type, len(data), name
        )
        try:  # counted first: refused (413 storage_full) before any byte is put
            self._store.charge_storage(identity.user_id, len(data))
        except StorageFull as full:
            full.field = "body"
            raise
        try:
            self._files.put(attachment, data)
        except BaseException:
            self._store.charge_storage(identity.user_id, -len(data))
            raise
        return attachment

    def discard(self, session: Session) -> None:
        """A deleted session's attachments, deleted and given back to its user's storage."""
        freed = self._files.discard(session.user_id, session.id)
        self._store.charge_storage(session.user_id, -freed)

    def get(self, identity: Identity, session_id: str, attachment_id: str) -> AttachmentFile:
        owned(self._store.get_session(session_id), identity)
        found = self._files.read(identity.user_id, attachment_url(session_id, attachment_id))
        if found is None:
            raise NotFound("Attachment not found", field="attachmentId")
        return found

    def check_message(
        self, identity: Identity, session_id: str, message: Mapping[str, object]
    ) -> None:
        """A user message's file parts name this session's attachments of the caller, with
        their stored types, under the caps (before anything is written)."""
        parts = file_parts(message)
        if not parts:
            return
        records: list[Attachment | None] = []
        for part in parts:
            parsed = parse_url(part.url)
            records.append(
                None if parsed is None else self._files.record(identity.user_id, *parsed)
            )
        check_message_files(parts, records, session_id)
