"""``POST /exec`` with ``"stream": true``: the output in frames while the command runs, the
result last; the caps and the keys hold as for a plain exec; the client trusts no frame."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.exec_stream import (
    FRAME_BYTES,
    ExecDone,
    ExecOutput,
    ExecPiece,
    read_pieces,
)
from openagents.sandbox.port import ExecResult, SandboxError

from tests.sandbox.conftest import RunningSandbox, raw_call


def gate(sandbox: RunningSandbox, *names: str) -> None:
    result = sandbox.client.exec("mkfifo " + " ".join(names))
    assert result.exit_code == 0, result


def open_gate(path: Path) -> None:
    path.write_text("go\n")  # blocks until the command opens its end: no race, no sleep


def until(pieces: Iterator[ExecPiece], stream: str, text: bytes) -> bytes:
    """Read pieces until ``stream`` holds ``text``; what it holds then."""
    seen = b""
    for piece in pieces:
        assert isinstance(piece, ExecOutput), f"the command ended first: {piece}"
        if piece.stream == stream:
            seen += piece.data
            if text in seen:
                return seen
    raise AssertionError("the stream ended")


def test_output_arrives_while_the_command_runs_and_the_result_last(
    sandbox: RunningSandbox,
) -> None:
    gate(sandbox, "gate1", "gate2")
    pieces = sandbox.client.exec_stream(
        "for i in 1 2; do echo line$i; echo err$i >&2; read x < gate$i; done; echo end"
    )
    assert until(pieces, "stdout", b"line1\n") == b"line1\n"
    open_gate(sandbox.workspace / "gate1")
    assert until(pieces, "stdout", b"line2\n") == b"line2\n"
    open_gate(sandbox.workspace / "gate2")
    rest = list(pieces)
    done = rest[-1]
    assert isinstance(done, ExecDone)
    assert all(isinstance(piece, ExecOutput) for piece in rest[:-1])
    assert done.result.exit_code == 0
    assert done.result.stdout == "line1\nline2\nend\n"
    assert done.result.stderr == "err1\nerr2\n"


def test_output_without_a_newline_arrives_too(sandbox: RunningSandbox) -> None:
    gate(sandbox, "gate")
    pieces = sandbox.client.exec_stream("printf partial; read x < gate; printf ' rest'")
    assert until(pieces, "stdout", b"partial") == b"partial"
    open_gate(sandbox.workspace / "gate")
    done = list(pieces)[-1]
    assert isinstance(done, ExecDone)
    assert done.result.stdout == "partial rest"


def test_ten_megabytes_stream_only_the_kept_bytes_in_bounded_frames(
    client: SandboxClient,
) -> None:
    pieces = list(
        client.exec_stream(
            "head -c 10000000 /dev/zero | tr '\\0' x; echo done >&2",
            max_output_bytes=1 << 20,
        )
    )
    output = [piece for piece in pieces if isinstance(piece, ExecOutput)]
    done = pieces[-1]
    assert isinstance(done, ExecDone)
    assert sum(len(p.data) for p in output if p.stream == "stdout") == 1 << 20
    assert max(len(p.data) for p in output) <= FRAME_BYTES
    assert b"".join(p.data for p in output if p.stream == "stderr") == b"done\n"
    assert done.result.truncated is True
    assert done.result.exit_code == 0
    assert len(done.result.stdout) == 1 << 20


def test_a_keyed_stream_runs_once_and_a_repeat_answers_the_result_alone(
    client: SandboxClient,
) -> None:
    first = list(client.exec_stream("echo ran >> count; cat count", key="call-1"))
    again = list(client.exec_stream("echo ran >> count; cat count", key="call-1"))
    plain = client.exec("echo ran >> count; cat count", key="call-1")
    assert first[0] == ExecOutput("stdout", b"ran\n")
    assert isinstance(first[-1], ExecDone)
    assert again == [first[-1]]
    assert plain == first[-1].result


def test_a_client_gone_mid_stream_leaves_the_command_to_finish(
    sandbox: RunningSandbox,
) -> None:
    gate(sandbox, "gate")
    command = "echo started; read x < gate; echo finished > finished; echo end"
    pieces = sandbox.client.exec_stream(command, key="call-2")
    assert until(pieces, "stdout", b"started") == b"started\n"
    pieces.close()  # type: ignore[attr-defined]  # a generator: the connection dropped
    open_gate(sandbox.workspace / "gate")
    answer = sandbox.client.exec(command, key="call-2")  # waits for the first run
    assert answer.stdout == "started\nend\n"
    assert (sandbox.workspace / "finished").read_text() == "finished\n"


def test_a_bad_streamed_exec_is_refused_before_any_frame(sandbox: RunningSandbox) -> None:
    status, body = raw_call(
        sandbox.endpoint,
        "POST",
        "/exec",
        headers={"Authorization": f"Bearer {sandbox.token}"},
        data=json.dumps({"command": "true", "stream": "yes"}).encode(),
    )
    assert (status, body["code"]) == (400, "bad_request")
    with pytest.raises(SandboxError, match="400"):
        list(sandbox.client.exec_stream("   "))


# ------------------------------------------------------------------ hostile framing


def frames(*parts: tuple[bytes, bytes]) -> io.BytesIO:
    return io.BytesIO(b"".join(struct.pack(">cI", kind, len(data)) + data for kind, data in parts))


def pieces_of(body: io.BytesIO, max_output_bytes: int = 1 << 20) -> list[ExecPiece]:
    return list(read_pieces(body, max_output_bytes=max_output_bytes, seconds=10))


RESULT = json.dumps({"exitCode": 0, "stdout": "a"}).encode()


def test_well_formed_frames_read_back() -> None:
    assert pieces_of(frames((b"o", b"a"), (b"e", b""), (b"r", RESULT))) == [
        ExecOutput("stdout", b"a"),
        ExecDone(ExecResult(0, "a", "")),
    ]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (frames((b"z", b"a"), (b"r", RESULT)), "unknown frame"),
        (frames((b"o", b"a" * (FRAME_BYTES + 1))), "output frame of"),
        (frames(*[(b"o", b"a" * FRAME_BYTES)] * 4, (b"r", RESULT)), "more than"),
        (frames((b"r", RESULT), (b"o", b"late")), "after its result"),
        (frames((b"o", b"a")), "ended before"),
        (frames((b"r", b"not json")), "not JSON"),
        (frames((b"r", b"[1]")), "not an object"),
        (io.BytesIO(struct.pack(">cI", b"r", 1 << 30)), "result of"),
        (io.BytesIO(b"\x00\x01"), "ended before"),
    ],
)
def test_hostile_frames_are_refused(body: io.BytesIO, why: str) -> None:
    with pytest.raises(SandboxError, match=why):
        pieces_of(body, max_output_bytes=FRAME_BYTES)
