"""A streamed exec's answer (sandboxd's ``POST /exec`` with ``"stream": true``, framing in
``sandbox/sandboxd/exec_stream.py``): its frames read back into typed pieces, never trusted.

The answer is the sandbox's word, so every frame is checked before its bytes are believed: a
known kind, an output frame at most ``FRAME_BYTES``, the output frames together at most what
the exec asked to keep (both streams, plus slack), the result at most ``MAX_RESULT_BYTES`` and
a JSON object, nothing after it, the whole answer within its time. Anything else is a
``SandboxError``; so is a stream that ends before its result.
"""

from __future__ import annotations

import http.client
import json
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from openagents.sandbox.answers import ExecResult
from openagents.sandbox.errors import SandboxError

HEADER = struct.Struct(">cI")
FRAME_BYTES = 64 << 10
MAX_RESULT_BYTES = 64 << 20  # a plain exec's answer's cap (the client's MAX_ANSWER_BYTES)
KINDS: dict[bytes, Literal["stdout", "stderr"]] = {b"o": "stdout", b"e": "stderr"}
RESULT = b"r"
READ_BYTES = 64 << 10


@dataclass(frozen=True)
class ExecOutput:
    """Bytes the command wrote to one stream while it ran (a preview: ``ExecDone`` is the truth)."""

    stream: Literal["stdout", "stderr"]
    data: bytes


@dataclass(frozen=True)
class ExecDone:
    """The command's result, as a plain exec answers it."""

    result: ExecResult


ExecPiece = ExecOutput | ExecDone


class Readable(Protocol):
    def read1(self, amount: int, /) -> bytes: ...


def read_pieces(
    body: Readable, *, max_output_bytes: int, seconds: float, what: str = "POST /exec"
) -> Iterator[ExecPiece]:
    """The pieces of a streamed exec's body, its result last; a ``SandboxError`` for any
    frame out of bounds, a body past ``seconds``, or one that ends before its result."""
    return _Frames(what, 2 * max_output_bytes + FRAME_BYTES).read(body, seconds)


class _Frames:
    def __init__(self, what: str, allowed: int) -> None:
        self._what = what
        self._allowed = allowed  # output bytes: both streams' kept bytes, and a frame's slack
        self._received = 0
        self._buffer = bytearray()
        self._done = False

    def read(self, body: Readable, seconds: float) -> Iterator[ExecPiece]:
        deadline = time.monotonic() + seconds
        while True:
            yield from self._complete()
            if time.monotonic() > deadline:
                raise self._refuse(f"was still answering after {seconds:g} s")
            try:
                chunk = body.read1(READ_BYTES)
            except (OSError, http.client.HTTPException) as error:
                raise self._refuse(f"stream broke: {error}") from error
            if not chunk:
                if self._done and not self._buffer:
                    return
                raise self._refuse("stream ended before the command's result")
            self._buffer += chunk

    def _complete(self) -> Iterator[ExecPiece]:
        """The frames the buffer holds whole, each checked from its header before its bytes."""
        while len(self._buffer) >= HEADER.size:
            kind, length = HEADER.unpack_from(self._buffer)
            self._check(kind, length)
            if len(self._buffer) < HEADER.size + length:
                return
            payload = bytes(self._buffer[HEADER.size : HEADER.size + length])
            del self._buffer[: HEADER.size + length]
            if kind == RESULT:
                self._done = True
                yield ExecDone(self._result(payload))
            else:
                self._received += length
                if payload:
                    yield ExecOutput(KINDS[kind], payload)

    def _check(self, kind: bytes, length: int) -> None:
        if self._done:
            raise self._refuse("sent more after its result")
        if kind == RESULT:
            if length > MAX_RESULT_BYTES:
                raise self._refuse(f"sent a result of {length} bytes")
        elif kind not in KINDS:
            raise self._refuse(f"sent an unknown frame {kind!r}")
        elif length > FRAME_BYTES:
            raise self._refuse(f"sent an output frame of {length} bytes")
        elif self._received + length > self._allowed:
            raise self._refuse(f"sent more than {self._allowed} bytes of output")

    def _result(self, payload: bytes) -> ExecResult:
        try:
            value = json.loads(payload)
        except ValueError:
            raise self._refuse("sent a result that is not JSON") from None
        if not isinstance(value, dict):
            raise self._refuse("sent a result that is not an object")
        return ExecResult.from_answer(value)

    def _refuse(self, why: str) -> SandboxError:
        return SandboxError(f"sandbox request failed: {self._what} {why}")
