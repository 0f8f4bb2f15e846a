"""What a route sees of its request: ``Request`` (method, path, query, headers, body) and the two
ways to answer other than with a JSON object, ``Stream`` (a chunked 200 written as it comes) and
``Upgrade`` (a 101 that hands the connection over). Protocols only: the transport (``http.py``)
implements them and imports this module; a route module imports this one, never the transport."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from .app import App
    from .errors import JsonObject


class Stream(Protocol):
    """A chunked ``200``: ``start`` sends the head, ``write`` one chunk each, ``end`` the last
    chunk (a stream never ended is cut short: the client sees an incomplete read). Once started,
    an error answers nothing more: the connection closes."""

    @property
    def connection(self) -> socket.socket: ...

    def start(self, content_type: str, headers: Mapping[str, str]) -> None: ...

    def write(self, data: bytes) -> None: ...

    def end(self) -> None: ...


class Upgrade(Protocol):
    """Switching protocols: ``accept`` answers ``101`` (``Connection: Upgrade``, ``Upgrade:
    protocol``); from then on ``connection`` carries the new protocol both ways, and ``read``
    reads from the client what it sent ahead of the 101 first (it sits in a buffer), then
    whatever comes."""

    @property
    def connection(self) -> socket.socket: ...

    def accept(self, protocol: str) -> None: ...

    def read(self, size: int) -> bytes: ...


class Request(Protocol):
    """One HTTP request: its path, query and (read at most once) body, and the ways to answer
    it other than the JSON object a route returns."""

    method: str
    path: str
    query: dict[str, str]
    stream: Stream
    upgrade: Upgrade

    def header(self, name: str) -> str | None: ...

    def body(self) -> Iterator[bytes]: ...

    def json(self) -> JsonObject: ...

    def drain(self) -> None:
        """Read and drop what the client still sends, so it can read our answer."""
        ...


# A route answers with a JSON object, or None when it answered itself (streamed, upgraded)
Route: TypeAlias = Callable[["App", Request], "JsonObject | None"]
