"""``GET /files``, ``GET /files/content`` and ``PUT /files/content``: listing, reading and
writing files inside the workspace."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import JsonObject, bad_request, not_found
from .fields import bounded_int, required_str
from .workspace import IGNORED_TOP_LEVEL, Workspace, normalized

if TYPE_CHECKING:
    from .app import App
    from .request import Request


DEFAULT_READ_BYTES = 1 << 20
MAX_READ_BYTES = 16 << 20
MAX_LIST_DEPTH = 5
MAX_LIST_ENTRIES = 10_000


def list_files(app: App, request: Request) -> JsonObject:
    relative = request.query.get("path", "")
    depth = bounded_int(request.query.get("depth", 1), "depth", 1, MAX_LIST_DEPTH)
    directory = app.workspace.resolve(relative)
    if not directory.exists():
        raise not_found(relative)
    if not directory.is_dir():
        raise bad_request(f"not a directory: {relative!r}", "not_a_directory")
    lister = Lister(app.workspace, depth)
    lister.visit(directory, 1)
    return {"entries": lister.entries, "truncated": lister.truncated}


class Lister:
    """A sorted, depth-limited walk that never descends into .git or follows symlinks."""

    def __init__(self, workspace: Workspace, depth: int) -> None:
        self.workspace = workspace
        self.depth = depth
        self.entries: list[JsonObject] = []
        self.truncated = False

    def visit(self, directory: Path, level: int) -> None:
        try:
            children = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            return
        for child in children:
            if directory == self.workspace.root and child.name in IGNORED_TOP_LEVEL:
                continue
            if len(self.entries) >= MAX_LIST_ENTRIES:
                self.truncated = True
                return
            try:
                kind = entry_kind(child)
                size = child.stat(follow_symlinks=False).st_size if kind != "dir" else 0
            except OSError:
                continue  # removed while we looked
            path = self.workspace.relative(Path(child.path))
            self.entries.append({"path": path, "type": kind, "size": size})
            if kind == "dir" and level < self.depth and child.name != ".git":
                self.visit(Path(child.path), level + 1)


def entry_kind(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "symlink"
    return "dir" if entry.is_dir(follow_symlinks=False) else "file"


def read_file(app: App, request: Request) -> JsonObject:
    relative = request.query.get("path", "")
    if not relative:
        raise bad_request("path is required")
    max_bytes = bounded_int(
        request.query.get("maxBytes", DEFAULT_READ_BYTES), "maxBytes", 0, MAX_READ_BYTES
    )
    path = app.workspace.resolve(relative)
    if not path.exists():
        raise not_found(relative)
    if not path.is_file():  # a directory, or a FIFO that would block the read
        raise bad_request(f"not a regular file: {relative!r}", "not_a_file")
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(max_bytes)
    truncated = size > len(data)
    content, encoding = encode_content(data, truncated)
    return {
        "path": normalized(relative),
        "content": content,
        "encoding": encoding,
        "size": size,
        "truncated": truncated,
    }


def encode_content(data: bytes, truncated: bool) -> tuple[str, str]:
    """UTF-8 text when the bytes are text (a cut multi-byte tail is dropped), else base64."""
    if b"\x00" not in data:
        for cut in range(4 if truncated else 1):
            try:
                return data[: len(data) - cut].decode("utf-8"), "utf-8"
            except UnicodeDecodeError:
                continue
    return base64.b64encode(data).decode("ascii"), "base64"


def write_file(app: App, request: Request) -> JsonObject:
    body = request.json()
    relative = required_str(body, "path")
    data = decode_content(body)
    path = app.workspace.resolve(relative)
    if path == app.workspace.root or path.is_dir():
        raise bad_request(f"not a regular file: {relative!r}", "not_a_file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except (FileExistsError, NotADirectoryError):
        raise bad_request(
            f"a parent of {relative!r} is not a directory", "not_a_directory"
        ) from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return {"path": normalized(relative), "size": len(data)}


def decode_content(body: JsonObject) -> bytes:
    content = body.get("content")
    if not isinstance(content, str):
        raise bad_request("content must be a string")
    encoding = body.get("encoding") or "utf-8"
    if encoding == "utf-8":
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request("content holds characters UTF-8 cannot encode") from None
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except binascii.Error:
            raise bad_request("content is not valid base64") from None
    raise bad_request("encoding must be 'utf-8' or 'base64'")
