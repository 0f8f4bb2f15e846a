"""Bedrock Runtime answered at the wire: a real ``bedrock-runtime`` client whose
``ConverseStream`` calls a botocore ``Stubber`` answers (the request validated against the
service model by ``ParamValidator``), each answer's stream events validated against the
``ConverseStreamOutput`` shape and encoded as real event-stream messages (prelude, headers,
CRCs) that botocore's own parser reads. Shared by the adapter's tests and the least-privilege
flow (tests/infra/test_least_privilege.py)."""

from __future__ import annotations

import binascii
import json
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
from botocore.config import Config
from botocore.eventstream import EventStream
from botocore.parsers import EventStreamJSONParser
from botocore.stub import Stubber
from botocore.validate import ParamValidator


def make_client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


# --- event-stream encoding -----------------------------------------------------------------


def _header(name: str, value: str) -> bytes:
    key, text = name.encode(), value.encode()
    return struct.pack("B", len(key)) + key + b"\x07" + struct.pack(">H", len(text)) + text


def encode(kind: str, payload: dict[str, Any], *, exception: bool = False) -> bytes:
    """One AWS event-stream message as Bedrock sends it."""
    type_header = ":exception-type" if exception else ":event-type"
    headers = (
        _header(type_header, kind)
        + _header(":content-type", "application/json")
        + _header(":message-type", "exception" if exception else "event")
    )
    body = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message))


class RawStream:
    """The HTTP body botocore reads the event stream from; with ``stall_after``, the body goes
    silent for ``stall`` seconds after that many messages (a close ends the wait, like a
    socket's)."""

    def __init__(
        self, messages: list[bytes], *, stall_after: int | None = None, stall: float = 30.0
    ) -> None:
        self.messages = messages
        self.stall_after = stall_after
        self.stall = stall
        self.closed = threading.Event()

    def stream(self) -> Iterator[bytes]:
        for index, message in enumerate(self.messages):
            if index == self.stall_after and self.closed.wait(self.stall):
                raise ConnectionError("closed")
            yield message

    def close(self) -> None:
        self.closed.set()


class Bedrock:
    """A stubbed client: each ``answer`` is one ConverseStream call with exact parameters."""

    def __init__(self) -> None:
        self.client = make_client()
        self.stubber = Stubber(self.client)
        self.streams: list[tuple[RawStream, Callable[[], None] | None]] = []
        operation = self.client.meta.service_model.operation_model("ConverseStream")
        self.shape = operation.output_shape.members["stream"]
        self.client.meta.events.register(
            "after-call.bedrock-runtime.ConverseStream", self._swap_in_stream
        )

    def answer(
        self,
        events: list[dict[str, Any]],
        expected: dict[str, Any] | None = None,
        *,
        stall_after: int | None = None,
        then: Callable[[], None] | None = None,
    ) -> RawStream:
        """Queue one call's answer; ``then`` runs once the call is made, before its stream is
        read (what happens meanwhile in the world)."""
        messages = []
        for event in events:
            report = ParamValidator().validate(event, self.shape)
            assert not report.has_errors(), report.generate_report()
            [(kind, payload)] = event.items()
            messages.append(encode(kind, payload, exception=kind.endswith("Exception")))
        raw = RawStream(messages, stall_after=stall_after)
        self.streams.append((raw, then))
        self.stubber.add_response("converse_stream", {"stream": {}}, expected)
        return raw

    def fail(self, code: str, message: str, status: int = 400) -> None:
        self.stubber.add_client_error(
            "converse_stream",
            service_error_code=code,
            service_message=message,
            http_status_code=status,
        )

    def _swap_in_stream(self, parsed: dict[str, Any], **_: Any) -> None:
        if "stream" in parsed:
            raw, then = self.streams.pop(0)
            if then is not None:
                then()
            parsed["stream"] = EventStream(
                raw, self.shape, EventStreamJSONParser(), "ConverseStream"
            )
