"""The HTTP server: requests and their bodies (sized or chunked), the bearer-token check,
dispatch to a route, JSON answers, streamed ones and upgraded connections, on TCP or a Unix
socket. It implements the request protocol of ``request.py``, all a route module sees of it."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import socket
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import ThreadingUnixStreamServer
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import parse_qs, urlsplit

from .errors import ApiError, JsonObject, bad_request
from .log import log
from .process import CHUNK_BYTES
from .request import Route, Stream, Upgrade

if TYPE_CHECKING:
    from .app import App


MAX_JSON_BODY_BYTES = 64 << 20
ERROR_DRAIN_LIMIT_BYTES = 64 << 20
SOCKET_TIMEOUT_SECONDS = 300.0

# the routes (``routes.find_route``), handed to the server by ``__main__``: the transport
# never imports the route table, nor a route module the transport (both see ``request.py``)
Router: TypeAlias = Callable[[str, str], Route]


class HttpRequest:
    """One HTTP request (``request.Request``): its path, query and (read at most once) body."""

    def __init__(self, handler: Handler) -> None:
        parsed = urlsplit(handler.path)
        self._handler = handler
        self.method = handler.command
        self.path = parsed.path
        self.query = {k: v[-1] for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
        self.stream: Stream = ChunkedStream(handler)
        self.upgrade: Upgrade = ConnectionUpgrade(handler)
        self._body: Iterator[bytes] | None = None
        self.body_done = False

    def header(self, name: str) -> str | None:
        return self._handler.headers.get(name)

    def body(self) -> Iterator[bytes]:
        if self._body is None:
            self._body = self._read_body()
        return self._body

    def json(self) -> JsonObject:
        raw = bytearray()
        for chunk in self.body():
            raw += chunk
            if len(raw) > MAX_JSON_BODY_BYTES:
                raise ApiError(413, "too_large", f"body exceeds {MAX_JSON_BODY_BYTES} bytes")
        try:
            value = json.loads(raw or b"{}")
        except ValueError:
            raise bad_request("body is not valid JSON", "invalid_json") from None
        if not isinstance(value, dict):
            raise bad_request("body must be a JSON object", "invalid_json")
        return value

    def drain(self) -> None:
        """Read and drop what the client still sends, so it can read our answer."""
        if self.body_done:
            return
        received = 0
        try:
            for chunk in self.body():
                received += len(chunk)
                if received > ERROR_DRAIN_LIMIT_BYTES:
                    return
        except (ApiError, OSError):
            return

    def _read_body(self) -> Iterator[bytes]:
        rfile = self._handler.rfile
        encoding = (self.header("Transfer-Encoding") or "").lower()
        if "chunked" in encoding:
            yield from read_chunked(rfile)
        else:
            yield from read_sized(rfile, self._content_length())
        self.body_done = True

    def _content_length(self) -> int:
        raw = self.header("Content-Length") or "0"
        if not raw.isdigit():
            raise bad_request("invalid Content-Length")
        return int(raw)


def read_sized(rfile: io.BufferedIOBase, length: int) -> Iterator[bytes]:
    remaining = length
    while remaining > 0:
        chunk = rfile.read(min(CHUNK_BYTES, remaining))
        if not chunk:
            raise bad_request("request body ended early", "incomplete_body")
        remaining -= len(chunk)
        yield chunk


def read_chunked(rfile: io.BufferedIOBase) -> Iterator[bytes]:
    while True:
        line = rfile.readline(1024)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise bad_request("malformed chunked body", "incomplete_body") from None
        if size == 0:
            while rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return
        yield from read_sized(rfile, size)
        rfile.readline(16)  # the CRLF after each chunk


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sandboxd/1"
    timeout = SOCKET_TIMEOUT_SECONDS  # a stalled client frees its thread eventually
    response_started = False
    connection: socket.socket  # the accepted socket (typeshed: Any)

    @property
    def app(self) -> App:
        return cast("SandboxServer | UnixSandboxServer", self.server).app

    def do_GET(self) -> None:
        self.dispatch()

    def do_POST(self) -> None:
        self.dispatch()

    def do_PUT(self) -> None:
        self.dispatch()

    def do_DELETE(self) -> None:
        self.dispatch()

    def do_PATCH(self) -> None:
        self.dispatch()

    def dispatch(self) -> None:
        started = time.monotonic()
        request = HttpRequest(self)
        status = 200
        try:
            self.authenticate()
            server = cast("SandboxServer | UnixSandboxServer", self.server)
            result = server.find_route(request.method, request.path)(self.app, request)
            if result is not None:
                self.send_json(200, result)
        except ApiError as error:
            status = error.status
            self.send_failure(request, error)
        except Exception as error:  # the daemon must answer, whatever broke
            status = 500
            log("error", "request.crashed", path=request.path, error=repr(error))
            log("error", "request.traceback", traceback=traceback.format_exc())
            self.send_failure(request, ApiError(500, "internal", "internal error"))
        finally:
            elapsed_ms = int((time.monotonic() - started) * 1000)
            log(
                "info",
                "request",
                method=request.method,
                path=request.path,
                status=status,
                durationMs=elapsed_ms,
            )

    def authenticate(self) -> None:
        scheme, _, presented = (self.headers.get("Authorization") or "").partition(" ")
        digest = hashlib.sha256(presented.strip().encode()).digest()
        valid = hmac.compare_digest(digest, self.app.token_digest)
        if scheme.lower() != "bearer" or not valid:
            raise ApiError(401, "unauthorized", "missing or invalid bearer token")

    def send_json(self, status: int, payload: JsonObject) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def send_failure(self, request: HttpRequest, error: ApiError) -> None:
        self.close_connection = True
        if self.response_started:
            return  # a streamed body is cut short instead: the client sees an incomplete read
        request.drain()
        with suppress(OSError):
            self.send_json(error.status, {"error": error.message, "code": error.code})

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # dispatch() logs every request as one JSON line

    def log_message(self, format: str, *args: Any) -> None:
        log("warning", "http", message=format % args)


class _Answer:
    """An answer that takes the handler's connection over: its status line, then the route's
    own bytes; the connection closes after it."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    @property
    def connection(self) -> socket.socket:
        return self._handler.connection

    def _begin(self, status: int) -> Handler:
        handler = self._handler
        handler.response_started = True
        handler.close_connection = True
        handler.send_response(status)
        return handler


class ChunkedStream(_Answer):
    """A chunked answer (``request.Stream``) on the handler's connection."""

    def start(self, content_type: str, headers: Mapping[str, str]) -> None:
        handler = self._begin(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Connection", "close")
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()

    def write(self, data: bytes) -> None:
        self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end(self) -> None:
        self._handler.wfile.write(b"0\r\n\r\n")


class ConnectionUpgrade(_Answer):
    """The handler's connection handed over after a ``101`` (``request.Upgrade``)."""

    def accept(self, protocol: str) -> None:
        handler = self._begin(101)
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Upgrade", protocol)
        handler.end_headers()
        handler.wfile.flush()

    def read(self, size: int) -> bytes:
        return self._handler.rfile.read1(size)


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], app: App, find_route: Router) -> None:
        self.app, self.find_route = app, find_route
        super().__init__(address, Handler)


class UnixSandboxServer(ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, path: str, app: App, find_route: Router) -> None:
        self.app, self.find_route = app, find_route
        with suppress(FileNotFoundError):
            os.unlink(path)  # a stale socket of an earlier run of this sandbox
        super().__init__(path, Handler)
        os.chmod(path, 0o600)
