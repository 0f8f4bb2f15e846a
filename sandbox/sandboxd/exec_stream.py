"""``POST /exec`` (the route): the plain answer (``exec.py``), or with ``"stream": true`` the
command's output as it comes, then its result.

A streamed exec answers 200 at once with a chunked body of frames, each ``kind`` (one byte),
``length`` (four bytes, big-endian) and ``length`` bytes:

- ``o`` / ``e``: bytes the command wrote to stdout / stderr, as read (at most
  ``FRAME_BYTES`` a frame; frames are cut where the reads fell, never at a line), only the first
  ``maxOutputBytes`` of each stream (what the result keeps);
- ``r``, last: the result as a plain exec answers it (JSON: ``exitCode``, ``stdout``, …), the
  whole truth about the command: the output frames are a preview of it.

Validation errors (400) answer before the stream starts, as JSON. With a ``key`` a streamed
exec runs once per key as a plain one does (``exec_keys.py``): a repeat sends no output
frames, only the result (waiting for the first run while it runs), or ``interrupted``.

The frames go out from a writer thread of their own, so a client that reads slowly (or not at
all) never holds the pipes: the command runs on and its output is kept as a plain exec keeps
it; what waits for the client is bounded by the caps (at most ``maxOutputBytes`` per stream).
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import struct
import threading
from typing import TYPE_CHECKING

from .errors import JsonObject, bad_request
from .exec import answer_exec, parse_exec, run_exec
from .exec_keys import exec_key
from .log import log

if TYPE_CHECKING:
    from .app import App
    from .exec import ExecSpec
    from .request import Request, Stream

CONTENT_TYPE = "application/x-sandboxd-exec-frames"
HEADER = struct.Struct(">cI")
FRAME_BYTES = 64 << 10
KINDS = {"stdout": b"o", "stderr": b"e"}
RESULT = b"r"
WRITE_BATCH_BYTES = 256 << 10


def frame(kind: bytes, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def exec_route(app: App, request: Request) -> JsonObject | None:
    body = request.json()
    streamed = body.get("stream", False)
    if not isinstance(streamed, bool):
        raise bad_request("stream must be true or false")
    if not streamed:
        return answer_exec(app, body)
    spec = parse_exec(app.workspace, body)
    key = exec_key(body.get("key"))
    stream_exec(app, request.stream, spec, key)
    return None


def stream_exec(app: App, stream: Stream, spec: ExecSpec, key: str | None) -> None:
    no_delay(stream.connection)
    stream.start(CONTENT_TYPE, {})
    writer = FrameWriter(stream)
    writer.start()
    try:
        if key is None:
            result = run_exec(spec, writer.output)
        else:
            result = app.exec_keys.run(app.workspace, key, lambda: run_exec(spec, writer.output))
    finally:
        writer.close()
    writer.join()
    if writer.gone:
        return  # the client left: nobody to tell (a keyed result is recorded all the same)
    payload = json.dumps(result).encode()
    try:
        stream.write(frame(RESULT, payload))
        stream.end()
    except OSError:
        log("warning", "exec.stream.gone")


def no_delay(connection: socket.socket) -> None:
    """Each frame leaves at once over TCP: small writes are not held back for an ACK (Nagle's
    algorithm against the client's delayed ACK costs ~40 ms a frame)."""
    if connection.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class FrameWriter(threading.Thread):
    """The output frames, written to the client in order as they come (batched while the
    client is slower than the command); a client gone is noted, the rest dropped."""

    def __init__(self, stream: Stream) -> None:
        super().__init__(daemon=True, name="exec-frames")
        self._stream = stream
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.gone = False

    def output(self, stream: str, data: bytes) -> None:
        kind = KINDS[stream]
        for start in range(0, len(data), FRAME_BYTES):
            self._queue.put(frame(kind, data[start : start + FRAME_BYTES]))

    def close(self) -> None:
        self._queue.put(None)

    def run(self) -> None:
        done = False
        while not done:
            batch = bytearray()
            item = self._queue.get()
            while item is not None:
                batch += item
                if len(batch) >= WRITE_BATCH_BYTES:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            done = item is None
            if batch and not self.gone:
                try:
                    self._stream.write(bytes(batch))
                except OSError:
                    self.gone = True
