"""SandboxClient's failure modes: every one is a SandboxError with a readable message."""

from __future__ import annotations

import io
import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from openagents.sandbox.answers import ExecResult, SnapshotManifest
from openagents.sandbox.client import (
    CHUNK_BYTES,
    SandboxClient,
    SandboxRequestError,
    UnsafeSocket,
    check_socket,
    read_chunks,
    unix_endpoint,
    verify_manifest,
)
from openagents.sandbox.port import Sandboxd, SandboxError

from tests.sandbox.conftest import RunningSandbox


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A port that accepts connections (backlog) but never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_connection_refused_is_a_sandbox_error() -> None:
    client = SandboxClient(f"http://127.0.0.1:{closed_port()}", "token", timeout=2)
    with pytest.raises(
        SandboxError, match=r"sandbox request failed: connection error \(GET /health\)"
    ):
        client.health()


def test_a_silent_sandbox_times_out(silent_listener: str) -> None:
    client = SandboxClient(silent_listener, "token", timeout=0.3)
    started = time.monotonic()
    with pytest.raises(SandboxError, match="sandbox request failed: timed out"):
        client.health()
    assert time.monotonic() - started < 3


def test_http_errors_carry_status_and_code(sandbox: RunningSandbox) -> None:
    with pytest.raises(SandboxRequestError) as missing:
        sandbox.client.read_file("nope.txt")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert str(missing.value).startswith("sandbox request failed: status code 404 not_found: ")
    assert "(GET /files/content)" in str(missing.value)
    with pytest.raises(SandboxRequestError, match="status code 401 unauthorized") as denied:
        SandboxClient(sandbox.endpoint, "wrong-token").health()
    assert denied.value.status == 401


def test_the_token_is_never_shown() -> None:
    client = SandboxClient("http://127.0.0.1:1", "very-secret-token")
    assert "very-secret-token" not in repr(client)
    with pytest.raises(SandboxError, match="http"):
        SandboxClient("file:///etc/passwd", "token")


def test_restore_streams_in_chunks() -> None:
    source = io.BytesIO(b"x" * (CHUNK_BYTES * 2 + 5))
    assert [len(chunk) for chunk in read_chunks(source)] == [CHUNK_BYTES, CHUNK_BYTES, 5]


def test_a_manifest_must_match_the_received_bytes() -> None:
    good = SnapshotManifest.from_answer({"id": "s", "sha256": "a" * 64, "archiveBytes": 10})
    verify_manifest(good, "a" * 64, 10)
    with pytest.raises(SandboxError, match="failed verification"):
        verify_manifest(good, "b" * 64, 10)
    with pytest.raises(SandboxError, match="failed verification"):
        verify_manifest(good, "a" * 64, 11)
    broken = SnapshotManifest.from_answer({"id": "s", "error": "tar exited with 2"})
    with pytest.raises(SandboxError, match="snapshot failed: tar exited"):
        verify_manifest(broken, "a" * 64, 10)


def test_snapshot_to_a_file_object(sandbox: RunningSandbox) -> None:
    sandbox.client.write_file("big.bin", bytes(range(256)) * 20_000)
    sink = io.BytesIO()
    manifest = sandbox.client.snapshot_to(sink)
    assert manifest.archive_bytes == len(sink.getvalue()) > 0
    assert (manifest.file_count, manifest.bytes) == (1, 5_120_000)


def test_the_client_fits_the_driver_port() -> None:
    ops: Sandboxd = SandboxClient("http://127.0.0.1:1", "token")  # checked by mypy
    assert callable(ops.snapshot_to)
    assert callable(ops.restore_from)


@contextmanager
def hostile(status: int, answer: object) -> Iterator[SandboxClient]:
    """A client of a hostile sandboxd on 127.0.0.1 answering every request with ``status``
    and ``answer`` as JSON."""
    body = json.dumps(answer).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield SandboxClient(f"http://127.0.0.1:{server.server_address[1]}", "token")
    finally:
        server.shutdown()
        server.server_close()


def test_a_bundle_must_be_a_git_bundle() -> None:
    with (
        hostile(200, {"ok": True}) as client,  # a JSON object instead of a bundle
        pytest.raises(SandboxError, match="sandboxd answered no git bundle"),
    ):
        client.git_bundle(max_bytes=1 << 20)


def test_an_exec_answer_is_typed_once_and_a_wrong_field_reads_as_absent() -> None:
    said = {"exitCode": 3, "stdout": "out", "stderr": "err", "truncated": True, "durationMs": 9}
    with hostile(200, said) as client:
        assert client.exec("true") == ExecResult(3, "out", "err", truncated=True, duration_ms=9)
    odd = {
        "exitCode": True,  # a bool is no exit code
        "stdout": 5,
        "stderr": None,
        "truncated": "yes",
        "timedOut": 1,
        "durationMs": "9",
        "interrupted": [True],
    }
    with hostile(200, odd) as client:
        assert client.exec("true") == ExecResult(None, "", "")


def test_an_error_is_read_as_words_not_as_objects() -> None:
    odd = {"code": {"not": "a code"}, "error": "x" * 50_000}  # no identifier, huge
    with hostile(409, odd) as client, pytest.raises(SandboxRequestError) as caught:
        client.health()
    assert (caught.value.status, caught.value.code) == (409, None)
    assert len(str(caught.value)) < 2_200  # the detail is cut at 2,000 characters


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def unix_sandboxd(path: Path) -> Iterator[list[str]]:
    """A sandboxd answering health on a Unix socket at ``path``; yields the paths it served."""
    served: list[str] = []

    class Handler(_Healthy):
        def do_GET(self) -> None:
            served.append(self.path)
            super().do_GET()

    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def test_a_unix_socket_is_reached_also_past_the_address_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ("deep" * 30)  # the path is longer than a socket address holds
    folder.mkdir()
    monkeypatch.chdir(folder)  # so that the server can bind it
    with unix_sandboxd(Path("sandboxd.sock")) as served:
        assert SandboxClient(unix_endpoint(str(folder / "sandboxd.sock")), "t").health()
    assert served == ["/health"]


def test_a_link_planted_in_place_of_the_socket_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    (tmp_path / "run").mkdir()
    with unix_sandboxd(tmp_path / "host" / "host.sock") as served:
        (tmp_path / "run" / "sandboxd.sock").symlink_to(tmp_path / "host" / "host.sock")
        client = SandboxClient(unix_endpoint(str(tmp_path / "run" / "sandboxd.sock")), "t")
        with pytest.raises(SandboxError, match="is a symbolic link, not sandboxd's socket"):
            client.health()
    assert served == []  # the host socket never saw the request (nor the token)


def test_a_linked_socket_folder_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    with unix_sandboxd(tmp_path / "host" / "sandboxd.sock") as served:
        (tmp_path / "run").symlink_to(tmp_path / "host")
        client = SandboxClient(unix_endpoint(str(tmp_path / "run" / "sandboxd.sock")), "t")
        with pytest.raises(SandboxError, match="connection error"):
            client.health()
    assert served == []


def test_a_regular_file_in_place_of_the_socket_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sandboxd.sock").write_text("not a socket")
    client = SandboxClient(unix_endpoint(str(tmp_path / "sandboxd.sock")), "t")
    with pytest.raises(SandboxError, match="is not a socket: refused"):
        client.health()


def _stat(mode: int, uid: int) -> os.stat_result:
    return os.stat_result((mode, 1, 1, 1, uid, uid, 0, 0, 0, 0))


def test_a_socket_owned_by_another_uid_than_its_folder_is_refused() -> None:
    folder = _stat(0o040755, 200000)  # the sandbox's folder; a root socket linked in it
    with pytest.raises(UnsafeSocket, match="owned by uid 0, not by its folder's owner"):
        check_socket("/x/sandboxd.sock", folder, _stat(0o140755, 0))
    check_socket("/x/sandboxd.sock", folder, _stat(0o140755, 200000))  # its own: fine
