#!/usr/bin/env python3
"""sandboxd: the small daemon inside every sandbox.

One file, standard library only. It serves a JSON-over-HTTP protocol (see README.md) for one
workspace folder: exec, files, git, workspace preparation, snapshot and restore. Every request
carries the per-sandbox bearer token given in the ``SANDBOXD_TOKEN`` environment variable.

    SANDBOXD_TOKEN=... python3 sandboxd.py --host 127.0.0.1 --port 0 --workspace /workspace
    SANDBOXD_TOKEN=... python3 sandboxd.py --unix /run/sandboxd/sandboxd.sock --workspace /workspace

prints ``{"ready": true, "port": N}`` (or ``{"ready": true, "socket": PATH}``) on stdout once
listening and logs JSON lines on stderr. The one-machine driver uses the Unix socket: the
sandbox has no network path to the host, only that socket, bind-mounted out of it.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from socketserver import ThreadingUnixStreamServer
from types import FrameType
from typing import IO, Any, cast
from urllib.parse import parse_qs, urlsplit

PROTOCOL_VERSION = 1
CHUNK_BYTES = 1 << 20
MAX_JSON_BODY_BYTES = 64 << 20
ERROR_DRAIN_LIMIT_BYTES = 64 << 20
SOCKET_TIMEOUT_SECONDS = 300.0
MAX_EXEC_TIMEOUT_SECONDS = 600.0
DEFAULT_EXEC_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
MAX_OUTPUT_BYTES_LIMIT = 16 << 20
OUTPUT_GRACE_SECONDS = 2.0
DEFAULT_READ_BYTES = 1 << 20
MAX_READ_BYTES = 16 << 20
MAX_LIST_DEPTH = 5
MAX_LIST_ENTRIES = 10_000
MANIFESTS_KEPT = 16
GIT_LOCAL_TIMEOUT_SECONDS = 60.0
GIT_NETWORK_TIMEOUT_SECONDS = 600.0
MAX_FILE_DIFF_CHARS = 512 << 10
MAX_TOTAL_DIFF_CHARS = 8 << 20
MAX_UNTRACKED_DIFF_BYTES = 1 << 20
BINARY_SNIFF_BYTES = 8000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
GIT_PROTOCOLS = "file:https:http:ssh:git"
# A fresh ext4 volume holds lost+found: it never counts as content.
IGNORED_TOP_LEVEL = frozenset({"lost+found"})
LOCK_FILES = frozenset(
    {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "uv.lock", "poetry.lock", "Cargo.lock"}
)
# Inherited by children when set: identity, temp dir and the proxies git may need.
PASSED_THROUGH_ENV = (
    "TMPDIR", "USER", "LOGNAME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip
DIFF_STATUS_ORDER = {"modified": 0, "added": 1, "renamed": 2, "deleted": 3}
CHANGE_WORDS = {
    "M": "modified",
    "T": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
}
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
MANIFEST_ROUTE = re.compile(r"^/snapshots/([A-Za-z0-9-]{1,64})/manifest$")
URL_CREDENTIALS = re.compile(r"(://)[^/@\s]+@")

JsonObject = dict[str, Any]


# ---------------------------------------------------------------------------- logging, errors

_log_lock = threading.Lock()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log(level: str, event: str, **fields: Any) -> None:
    """One JSON line on stderr. Callers never pass tokens or request bodies."""
    line = json.dumps({"ts": now_iso(), "level": level, "event": event, **fields}, default=str)
    with _log_lock:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


class ApiError(Exception):
    """An error answered as ``{"error": message, "code": code}`` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_request(message: str, code: str = "bad_request") -> ApiError:
    return ApiError(400, code, message)


def outside_workspace(path: str) -> ApiError:
    return bad_request(f"path is outside the workspace: {path!r}", "path_outside_workspace")


def not_found(path: str) -> ApiError:
    return ApiError(404, "not_found", f"no such file or directory: {path!r}")


# ---------------------------------------------------------------------------- workspace


class Workspace:
    """The workspace root (a real path) and the confinement of every path under it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative``; refuses anything that ends up outside the root."""
        if "\x00" in relative or relative.startswith("/"):
            raise outside_workspace(relative)
        if ".." in PurePosixPath(relative).parts:
            raise outside_workspace(relative)
        real = Path(os.path.realpath(self.root / relative))
        if real != self.root and not real.is_relative_to(self.root):
            raise outside_workspace(relative)
        return real

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def is_empty(self) -> bool:
        return not any(entry.name not in IGNORED_TOP_LEVEL for entry in os.scandir(self.root))

    def empty(self) -> None:
        """Delete everything inside the root (the root itself may be a mount point)."""
        for entry in os.scandir(self.root):
            if entry.name in IGNORED_TOP_LEVEL:
                continue
            if entry.is_dir(follow_symlinks=False):
                remove_tree(Path(entry.path))
            else:
                os.unlink(entry.path)

    def tally(self) -> tuple[int, int]:
        """(non-directory entries, bytes of regular files) below the root."""
        count = 0
        total_bytes = 0
        pending = [self.root]
        while pending:
            directory = pending.pop()
            for entry in os.scandir(directory):
                if directory == self.root and entry.name in IGNORED_TOP_LEVEL:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                    continue
                count += 1
                if entry.is_file(follow_symlinks=False):
                    total_bytes += entry.stat(follow_symlinks=False).st_size
        return count, total_bytes


def remove_tree(path: Path) -> None:
    def make_writable_and_retry(func: Callable[..., Any], failed: str, *_: Any) -> None:
        os.chmod(os.path.dirname(failed), 0o700)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, 0o700)
        func(failed)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=make_writable_and_retry)


def normalized(relative: str) -> str:
    return PurePosixPath(relative).as_posix() if relative else "."


# ---------------------------------------------------------------------------- processes


def base_env(workspace: Workspace) -> dict[str, str]:
    """The minimal environment of every child: the daemon's own environment never leaks."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(workspace.root)),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "SANDBOX_WORKSPACE": str(workspace.root),
        # git must never find a repository above the workspace (a local sandbox lives inside
        # the project's own checkout).
        "GIT_CEILING_DIRECTORIES": str(workspace.root.parent),
    }
    for name in PASSED_THROUGH_ENV:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def tool_env(workspace: Workspace) -> dict[str, str]:
    return {**base_env(workspace), "LC_ALL": "C"}


def spawn(argv: list[str], **options: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, **options)  # noqa: S603 - argv lists, never a shell string


def run_tool(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(  # noqa: S603 - argv lists, never a shell string
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ApiError(500, "tool_timeout", f"{argv[0]} timed out after {timeout:g}s") from error


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


class OutputCollector(threading.Thread):
    """Drains one pipe, keeping the first ``cap`` bytes and noting whether more came."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.cap = cap
        self.kept = bytearray()
        self.truncated = False

    def run(self) -> None:
        try:
            while data := os.read(self.stream.fileno(), 65536):
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += data[:room]
                if len(data) > room:
                    self.truncated = True
        finally:
            self.stream.close()

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")


# ---------------------------------------------------------------------------- request parsing


def required_str(body: JsonObject, name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise bad_request(f"{name} must be a non-empty string")
    return value


def optional_str(body: JsonObject, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"{name} must be a string or null")
    return value


def optional_bool(body: JsonObject, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise bad_request(f"{name} must be a boolean")
    return value


def bounded_number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad_request(f"{name} must be a number between {low:g} and {high:g}")
    return float(value)


def bounded_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise bad_request(f"{name} must be an integer") from None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"{name} must be an integer between {low} and {high}")
    return value


def single_line(value: str, name: str) -> str:
    if any(character in value for character in "\x00\r\n"):
        raise bad_request(f"{name} must be a single line")
    return value


# ---------------------------------------------------------------------------- HTTP plumbing


class Request:
    """One HTTP request: its path, query and (read at most once) body."""

    def __init__(self, handler: Handler) -> None:
        parsed = urlsplit(handler.path)
        self.handler = handler
        self.method = handler.command
        self.path = parsed.path
        self.query = {k: v[-1] for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
        self._body: Iterator[bytes] | None = None
        self.body_done = False

    def header(self, name: str) -> str | None:
        return self.handler.headers.get(name)

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
        rfile = self.handler.rfile
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


Route = Callable[["App", Request], "JsonObject | None"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sandboxd/1"
    timeout = SOCKET_TIMEOUT_SECONDS  # a stalled client frees its thread eventually
    response_started = False

    @property
    def app(self) -> App:
        return cast(SandboxServer, self.server).app

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
        request = Request(self)
        status = 200
        try:
            self.authenticate()
            result = find_route(request.method, request.path)(self.app, request)
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

    def send_failure(self, request: Request, error: ApiError) -> None:
        self.close_connection = True
        if self.response_started:
            return  # a streamed body is cut short instead: the client sees an incomplete read
        request.drain()
        with suppress(OSError):
            self.send_json(error.status, {"error": error.message, "code": error.code})

    def start_stream(self, content_type: str, headers: Mapping[str, str]) -> None:
        self.response_started = True
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # dispatch() logs every request as one JSON line

    def log_message(self, format: str, *args: Any) -> None:
        log("warning", "http", message=format % args)


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        super().__init__(address, Handler)


class UnixSandboxServer(ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, path: str, app: App) -> None:
        self.app = app
        with suppress(FileNotFoundError):
            os.unlink(path)  # a stale socket of an earlier run of this sandbox
        super().__init__(path, Handler)
        os.chmod(path, 0o600)


def find_route(method: str, path: str) -> Route:
    route = ROUTES.get((method, path))
    if route is not None:
        return route
    if method == "GET" and MANIFEST_ROUTE.match(path):
        return get_manifest
    if any(known_path == path for _, known_path in ROUTES):
        raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}")
    raise ApiError(404, "not_found", f"no such endpoint: {method} {path}")


# ---------------------------------------------------------------------------- app state


class ManifestStore:
    """The last few snapshot manifests, in memory."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._items: OrderedDict[str, JsonObject] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, snapshot_id: str, manifest: JsonObject) -> None:
        with self._lock:
            self._items[snapshot_id] = manifest
            self._items.move_to_end(snapshot_id)
            while len(self._items) > self._keep:
                self._items.popitem(last=False)

    def get(self, snapshot_id: str) -> JsonObject | None:
        with self._lock:
            return self._items.get(snapshot_id)


@dataclass
class App:
    workspace: Workspace
    token_digest: bytes
    manifests: ManifestStore = field(default_factory=lambda: ManifestStore(MANIFESTS_KEPT))
    busy: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def exclusive(self, action: str) -> Iterator[None]:
        """Prepare, snapshot and restore never overlap."""
        if not self.busy.acquire(blocking=False):
            raise ApiError(409, "busy", f"cannot {action}: another workspace operation is running")
        try:
            yield
        finally:
            self.busy.release()


# ---------------------------------------------------------------------------- health, sync


def health(app: App, request: Request) -> JsonObject:
    return {"ok": True, "version": PROTOCOL_VERSION, "workspace": str(app.workspace.root)}


def sync(app: App, request: Request) -> JsonObject:
    os.sync()
    return {"ok": True}


# ---------------------------------------------------------------------------- exec


@dataclass(frozen=True)
class ExecSpec:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float
    max_output: int


def exec_command(app: App, request: Request) -> JsonObject:
    return run_exec(parse_exec(app.workspace, request.json()))


def parse_exec(workspace: Workspace, body: JsonObject) -> ExecSpec:
    return ExecSpec(
        argv=exec_argv(body.get("command"), body.get("argv")),
        cwd=exec_cwd(workspace, body.get("cwd")),
        env={**base_env(workspace), **exec_env(body.get("env"))},
        timeout=bounded_number(
            body.get("timeoutSeconds", DEFAULT_EXEC_TIMEOUT_SECONDS),
            "timeoutSeconds",
            0.001,
            MAX_EXEC_TIMEOUT_SECONDS,
        ),
        max_output=bounded_int(
            body.get("maxOutputBytes", DEFAULT_MAX_OUTPUT_BYTES),
            "maxOutputBytes",
            0,
            MAX_OUTPUT_BYTES_LIMIT,
        ),
    )


def exec_argv(command: Any, argv: Any) -> list[str]:
    if (command is None) == (argv is None):
        raise bad_request("give exactly one of command or argv")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise bad_request("command must be a non-empty string")
        return ["bash", "-lc", command]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise bad_request("argv must be a non-empty list of strings")
    return [str(part) for part in argv]


def exec_cwd(workspace: Workspace, cwd: Any) -> Path:
    if cwd is not None and not isinstance(cwd, str):
        raise bad_request("cwd must be a string")
    path = workspace.resolve(cwd or "")
    if not path.exists():
        raise not_found(cwd or ".")
    if not path.is_dir():
        raise bad_request(f"cwd is not a directory: {cwd!r}", "not_a_directory")
    return path


def exec_env(env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise bad_request("env must be an object of strings")
    for name, value in env.items():
        if not isinstance(value, str) or not name or "=" in name or "\x00" in name + value:
            raise bad_request(f"env entry {name!r} must be a NAME (no '=') with a string value")
    return cast(dict[str, str], env)


def run_exec(spec: ExecSpec) -> JsonObject:
    started = time.monotonic()
    try:
        process = spawn(
            spec.argv,
            cwd=spec.cwd,
            env=spec.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        code = 127 if isinstance(error, FileNotFoundError) else 126
        return exec_result(code, "", f"sandboxd: {spec.argv[0]}: {error.strerror}\n", started)
    stdout = OutputCollector(cast(IO[bytes], process.stdout), spec.max_output)
    stderr = OutputCollector(cast(IO[bytes], process.stderr), spec.max_output)
    stdout.start()
    stderr.start()
    timed_out = wait_or_kill(process, spec.timeout)
    # Background children may keep the pipes open: give them a moment, then stop waiting.
    grace = min(OUTPUT_GRACE_SECONDS, max(0.1, spec.timeout - (time.monotonic() - started)))
    for collector in (stdout, stderr):
        collector.join(grace)
    exit_code = None if timed_out else shell_exit_code(process.returncode)
    result = exec_result(exit_code, stdout.text(), stderr.text(), started)
    result["truncated"] = stdout.truncated or stderr.truncated
    result["timedOut"] = timed_out
    return result


def wait_or_kill(process: subprocess.Popen[bytes], timeout: float) -> bool:
    try:
        process.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.wait()
        return True


def shell_exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


def exec_result(exit_code: int | None, stdout: str, stderr: str, started: float) -> JsonObject:
    return {
        "exitCode": exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": False,
        "timedOut": False,
        "durationMs": int((time.monotonic() - started) * 1000),
    }


# ---------------------------------------------------------------------------- files


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


# ---------------------------------------------------------------------------- git plumbing


class Git:
    """git in the workspace, with a fixed environment and secrets redacted from errors."""

    def __init__(self, workspace: Workspace, extra_env: Mapping[str, str] | None = None) -> None:
        self.workspace = workspace
        self.env = {
            **tool_env(workspace),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_ALLOW_PROTOCOL": GIT_PROTOCOLS,
            **(extra_env or {}),
        }
        self.secrets: list[str] = []

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = GIT_LOCAL_TIMEOUT_SECONDS
    ) -> subprocess.CompletedProcess[bytes]:
        # An empty credential.helper list: no helper may store a token anywhere.
        argv = ["git", "-c", "credential.helper=", "-c", "core.quotePath=false", *args]
        return run_tool(argv, cwd=cwd or self.workspace.root, env=self.env, timeout=timeout)

    def output(self, *args: str, timeout: float = GIT_LOCAL_TIMEOUT_SECONDS) -> bytes:
        """stdout of a git command that must succeed; 422 with git's stderr otherwise."""
        completed = self.run(*args, timeout=timeout)
        if completed.returncode != 0:
            raise ApiError(422, "git_failed", self.failure(args, completed))
        return completed.stdout

    def maybe(self, *args: str) -> str | None:
        """stdout of a git query, or None when git says no."""
        completed = self.run(*args)
        if completed.returncode != 0:
            return None
        return completed.stdout.decode("utf-8", "replace").strip() or None

    def failure(self, args: tuple[str, ...], completed: subprocess.CompletedProcess[bytes]) -> str:
        stderr = completed.stderr.decode("utf-8", "replace").strip()
        return self.redact(f"git {args[0]} failed ({completed.returncode}): {stderr}")

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return URL_CREDENTIALS.sub(r"\1***@", text)

    def require_repository(self) -> None:
        if not (self.workspace.root / ".git").exists():
            raise ApiError(409, "not_a_repository", "the workspace is not a git repository")

    def head(self) -> str | None:
        return self.maybe("rev-parse", "--verify", "--quiet", "HEAD^{commit}")

    def current_branch(self) -> str | None:
        return self.maybe("symbolic-ref", "--quiet", "--short", "HEAD")

    def default_remote_ref(self) -> str | None:
        """``refs/remotes/origin/<default>`` when the clone knows origin's default branch."""
        return self.maybe("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")

    def has_ref(self, ref: str) -> bool:
        return self.maybe("rev-parse", "--verify", "--quiet", ref) is not None


# ---------------------------------------------------------------------------- git endpoints


def git_branch(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    branch = git.current_branch()
    return {"branch": branch, "head": git.head(), "detached": branch is None}


@dataclass
class PorcelainStatus:
    branch: str | None = None
    detached: bool = False
    ahead: int | None = None
    behind: int | None = None
    staged: int = 0
    unstaged: int = 0
    untracked: int = 0
    files: list[dict[str, str]] = field(default_factory=list)


def git_status(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    status = parse_porcelain(git.output("status", "--porcelain=v2", "--branch", "-z"))
    if status.ahead is None:
        status.ahead, status.behind = ahead_behind_default(git)
    changes = status.staged + status.unstaged + status.untracked
    return {
        "branch": status.branch,
        "isDetachedHead": status.detached,
        "hasUncommittedChanges": changes > 0,
        "hasUnpushedCommits": status.ahead > 0,
        "stagedCount": status.staged,
        "unstagedCount": status.unstaged,
        "untrackedCount": status.untracked,
        "ahead": status.ahead,
        "behind": status.behind or 0,
        "uncommittedFiles": status.files,
    }


def parse_porcelain(raw: bytes) -> PorcelainStatus:
    status = PorcelainStatus()
    records = iter(raw.decode("utf-8", "replace").split("\x00"))
    for record in records:
        if record.startswith("# "):
            apply_status_header(status, record[2:])
        elif record[:2] in ("1 ", "2 ", "u "):
            apply_status_change(status, record, records)
        elif record.startswith("? "):
            status.untracked += 1
            status.files.append({"path": record[2:], "status": "untracked"})
    return status


def apply_status_header(status: PorcelainStatus, header: str) -> None:
    key, _, value = header.partition(" ")
    if key == "branch.head":
        status.detached = value == "(detached)"
        status.branch = None if status.detached else value
    elif key == "branch.ab":
        ahead, behind = value.split()
        status.ahead, status.behind = int(ahead), -int(behind)


def apply_status_change(status: PorcelainStatus, record: str, records: Iterator[str]) -> None:
    kind = record[0]
    field_count = {"1": 8, "2": 9, "u": 10}[kind]
    parts = record.split(" ", field_count)
    index_code, worktree_code = parts[1][0], parts[1][1]
    if kind == "2":
        next(records, None)  # the original path of a rename or copy
    if kind == "u":
        status.unstaged += 1
        word = "conflicted"
    else:
        status.staged += index_code != "."
        status.unstaged += worktree_code != "."
        code = index_code if index_code != "." else worktree_code
        word = CHANGE_WORDS.get(code, "modified")
    status.files.append({"path": parts[field_count], "status": word})


def ahead_behind_default(git: Git) -> tuple[int, int]:
    """Without an upstream, "ahead" is measured against origin's default branch."""
    if git.head() is None or not git.has_ref("refs/remotes/origin/HEAD"):
        return 0, 0
    counts = git.maybe("rev-list", "--left-right", "--count", "refs/remotes/origin/HEAD...HEAD")
    if counts is None:
        return 0, 0
    behind, ahead = (int(number) for number in counts.split())
    return ahead, behind


# ---------------------------------------------------------------------------- diff


@dataclass
class DiffFile:
    path: str
    status: str
    additions: int = 0
    deletions: int = 0
    diff: str | None = None
    old_path: str | None = None

    def to_json(self) -> JsonObject:
        return {
            "path": self.path,
            "oldPath": self.old_path,
            "status": self.status,
            "additions": self.additions,
            "deletions": self.deletions,
            "diff": self.diff,
        }


def git_diff(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    base, base_ref = diff_base(git)
    files = tracked_changes(git, base or EMPTY_TREE)
    files += [untracked_change(app.workspace, path) for path in untracked_paths(git)]
    files.sort(key=lambda item: (DIFF_STATUS_ORDER.get(item.status, 9), item.path))
    limit_diff_bodies(files)
    return {
        "base": base,
        "baseRef": base_ref,
        "files": [item.to_json() for item in files],
        "totalAdditions": sum(item.additions for item in files),
        "totalDeletions": sum(item.deletions for item in files),
    }


def diff_base(git: Git) -> tuple[str | None, str | None]:
    """(commit, label): merge-base with origin's default branch, else HEAD, else nothing."""
    head = git.head()
    if head is None:
        return None, None
    default_ref = git.default_remote_ref()
    if default_ref is not None:
        merge_base = git.maybe("merge-base", default_ref, "HEAD")
        if merge_base is not None:
            return merge_base, default_ref.removeprefix("refs/remotes/")
    return head, "HEAD"


DIFF_OPTIONS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")


def tracked_changes(git: Git, base: str) -> list[DiffFile]:
    files = parse_name_status(git.output("diff", *DIFF_OPTIONS, "--name-status", "-z", base))
    counts = parse_numstat(git.output("diff", *DIFF_OPTIONS, "--numstat", "-z", base))
    patch = git.output("diff", *DIFF_OPTIONS, "--src-prefix=a/", "--dst-prefix=b/", base)
    patches = split_patch(patch.decode("utf-8", "replace"))
    if len(patches) != len(files) or len(counts) != len(files):
        return [file_change(git, base, item) for item in files]  # e.g. unmerged paths
    for item, (additions, deletions), body in zip(files, counts, patches, strict=True):
        item.additions, item.deletions = additions, deletions
        item.diff = None if is_generated(item.path) else body
    return files


def file_change(git: Git, base: str, item: DiffFile) -> DiffFile:
    """One file's counts and patch, asked for on its own."""
    paths = [item.old_path, item.path] if item.old_path else [item.path]
    counts = parse_numstat(git.output("diff", *DIFF_OPTIONS, "--numstat", "-z", base, "--", *paths))
    item.additions, item.deletions = counts[0] if counts else (0, 0)
    if not is_generated(item.path):
        patch = git.output(
            "diff", *DIFF_OPTIONS, "--src-prefix=a/", "--dst-prefix=b/", base, "--", *paths
        )
        item.diff = patch.decode("utf-8", "replace") or None
    return item


def parse_name_status(raw: bytes) -> list[DiffFile]:
    tokens = iter(raw.decode("utf-8", "replace").split("\x00"))
    files: list[DiffFile] = []
    for code in tokens:
        if not code:
            continue
        if code[0] in "RC":
            old_path, new_path = next(tokens), next(tokens)
            status = "renamed" if code[0] == "R" else "added"
            files.append(
                DiffFile(new_path, status, old_path=old_path if status == "renamed" else None)
            )
        else:
            files.append(DiffFile(next(tokens), CHANGE_WORDS.get(code[0], "modified")))
    return files


def parse_numstat(raw: bytes) -> list[tuple[int, int]]:
    tokens = iter(raw.decode("utf-8", "replace").split("\x00"))
    counts: list[tuple[int, int]] = []
    for record in tokens:
        if not record:
            continue
        additions, deletions, path = record.split("\t", 2)
        if not path:  # a rename: the old and new paths follow as their own records
            next(tokens)
            next(tokens)
        counts.append((to_count(additions), to_count(deletions)))
    return counts


def to_count(value: str) -> int:
    return int(value) if value.isdigit() else 0  # "-" for binary files


def split_patch(patch: str) -> list[str]:
    return [chunk for chunk in re.split(r"(?m)^(?=diff --git )", patch) if chunk]


def is_generated(path: str) -> bool:
    name = PurePosixPath(path).name
    return name in LOCK_FILES or name.endswith(".min.js")


def untracked_paths(git: Git) -> list[str]:
    raw = git.output("ls-files", "--others", "--exclude-standard", "-z")
    paths = raw.decode("utf-8", "replace").split("\x00")
    return [path for path in paths if path and not path.endswith("/")]


def untracked_change(workspace: Workspace, relative: str) -> DiffFile:
    path = workspace.root / relative
    item = DiffFile(relative, "added")
    if path.is_symlink() or not path.is_file():
        item.additions = 1
        return item
    size = path.stat().st_size
    with open(path, "rb") as handle:
        data = handle.read(MAX_UNTRACKED_DIFF_BYTES)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        item.diff = f"{diff_header(relative)}Binary files /dev/null and b/{relative} differ\n"
        return item
    if size > len(data):
        item.additions = count_lines(path)
        return item
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    item.additions = len(lines)
    if not is_generated(relative):
        item.diff = new_file_patch(relative, lines, os.access(path, os.X_OK))
    return item


def count_lines(path: Path) -> int:
    lines = 0
    last = b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def diff_header(relative: str) -> str:
    return f"diff --git a/{relative} b/{relative}\n"


def new_file_patch(relative: str, lines: list[str], executable: bool) -> str:
    mode = "100755" if executable else "100644"
    header = f"{diff_header(relative)}new file mode {mode}\n"
    if not lines:
        return header
    span = "1" if len(lines) == 1 else f"1,{len(lines)}"
    body = "".join(f"+{line}" for line in lines)
    if not body.endswith("\n"):
        body += "\n\\ No newline at end of file\n"
    return f"{header}--- /dev/null\n+++ b/{relative}\n@@ -0,0 +{span} @@\n{body}"


def limit_diff_bodies(files: list[DiffFile]) -> None:
    """Huge bodies are dropped (counts stay) so one response cannot grow without bound."""
    budget = MAX_TOTAL_DIFF_CHARS
    for item in files:
        if item.diff is None:
            continue
        if len(item.diff) > MAX_FILE_DIFF_CHARS or len(item.diff) > budget:
            item.diff = None
            continue
        budget -= len(item.diff)


# ---------------------------------------------------------------------------- prepare


@dataclass(frozen=True)
class PrepareSpec:
    clone_url: str
    branch: str | None
    is_new_branch: bool
    git_name: str
    git_email: str
    token: str | None


def prepare_workspace(app: App, request: Request) -> JsonObject:
    spec = parse_prepare(request.json())
    with app.exclusive("prepare the workspace"), askpass_env(app.workspace, spec.token) as env:
        git = Git(app.workspace, env)
        if spec.token:
            git.secrets.append(spec.token)
        if spec.branch is not None:
            validate_branch_name(git, spec.branch)
        if not spec.clone_url:  # no repository: a new one, so the work is bundled and diffed
            branch = ensure_init(git, spec)
            default_branch = None
        else:
            ensure_clone(git, spec)
            default_ref = git.default_remote_ref()
            default_branch = (
                default_ref.removeprefix("refs/remotes/origin/") if default_ref else None
            )
            branch = checkout(git, spec, default_ref)
        git.output("config", "user.name", spec.git_name)
        git.output("config", "user.email", spec.git_email)
        head = git.head()
    log("info", "workspace.prepared", cloneUrl=git.redact(spec.clone_url), branch=branch, head=head)
    return {"branch": branch, "head": head, "defaultBranch": default_branch}


def parse_prepare(body: JsonObject) -> PrepareSpec:
    """``cloneUrl`` empty (or absent): initialise a repository in the empty workspace."""
    clone_url = single_line(optional_str(body, "cloneUrl") or "", "cloneUrl")
    if clone_url.startswith("-"):
        raise bad_request("cloneUrl must not start with '-'")
    spec = PrepareSpec(
        clone_url=clone_url,
        branch=optional_str(body, "branch") or None,
        is_new_branch=optional_bool(body, "isNewBranch", False),
        git_name=single_line(required_str(body, "gitName"), "gitName"),
        git_email=single_line(required_str(body, "gitEmail"), "gitEmail"),
        token=optional_str(body, "token") or None,
    )
    if spec.is_new_branch and spec.branch is None:
        raise bad_request("isNewBranch needs a branch")
    return spec


def validate_branch_name(git: Git, branch: str) -> None:
    completed = git.run("check-ref-format", "--branch", branch)
    if branch.startswith("-") or completed.returncode != 0:
        raise bad_request(f"invalid branch name: {branch!r}", "invalid_branch")


@contextmanager
def askpass_env(workspace: Workspace, token: str | None) -> Iterator[dict[str, str]]:
    """git's prompt environment; a token reaches git only through a private askpass helper."""
    env = {"GIT_TERMINAL_PROMPT": "0", "SSH_ASKPASS": "", "GCM_INTERACTIVE": "never"}
    if not token:
        yield env
        return
    directory = Path(tempfile.mkdtemp(prefix="sandboxd-askpass-"))  # mode 0700
    try:
        if directory.resolve().is_relative_to(workspace.root):
            raise ApiError(500, "internal", "the temporary directory is inside the workspace")
        env["GIT_ASKPASS"] = str(write_askpass(directory, token))
        yield env
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def write_askpass(directory: Path, token: str) -> Path:
    token_file = directory / "token"
    descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token)
    script = directory / "askpass"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  [Uu]sername*) echo x-access-token ;;\n"
        f"  *) cat {shlex.quote(str(token_file))} ;;\n"
        "esac\n"
    )
    script.chmod(0o700)
    return script


def ensure_clone(git: Git, spec: PrepareSpec) -> None:
    """Clone into the empty workspace, or accept a clone of the same URL that is already there."""
    workspace = git.workspace
    if (workspace.root / ".git").exists():
        origin = git.maybe("config", "--get", "remote.origin.url")
        if origin != spec.clone_url:
            raise ApiError(409, "workspace_not_empty", "the workspace holds another repository")
        return
    if not workspace.is_empty():
        raise ApiError(409, "workspace_not_empty", "the workspace is not empty")
    # Clone beside the final place (same file system), then move in: this works even when the
    # workspace is a volume root that must keep its lost+found.
    staging = Path(tempfile.mkdtemp(prefix=".sandboxd-clone-", dir=workspace.root))
    try:
        git.output(
            "clone",
            "--quiet",
            "--",
            spec.clone_url,
            str(staging),
            timeout=GIT_NETWORK_TIMEOUT_SECONDS,
        )
        for child in staging.iterdir():
            child.rename(workspace.root / child.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    exclude_volume_leftovers(workspace)


def ensure_init(git: Git, spec: PrepareSpec) -> str | None:
    """A new repository with one empty commit (so HEAD, diffs and bundles exist), or the one
    an earlier prepare made; ``branch`` names its branch (default ``main``)."""
    workspace = git.workspace
    if not (workspace.root / ".git").exists():
        git.output("init", "--quiet", "--initial-branch", spec.branch or "main")
        exclude_volume_leftovers(workspace)
    if git.head() is None:
        identity = ("-c", f"user.name={spec.git_name}", "-c", f"user.email={spec.git_email}")
        git.output(*identity, "commit", "--quiet", "--allow-empty", "-m", "Initial commit")
    return git.current_branch()


def exclude_volume_leftovers(workspace: Workspace) -> None:
    """Keep a volume's lost+found out of git status and diffs."""
    present = [name for name in IGNORED_TOP_LEVEL if (workspace.root / name).exists()]
    if present:
        info = workspace.root / ".git" / "info"
        info.mkdir(exist_ok=True)
        with open(info / "exclude", "a") as exclude:
            exclude.writelines(f"/{name}/\n" for name in present)


def checkout(git: Git, spec: PrepareSpec, default_ref: str | None) -> str | None:
    branch = spec.branch
    if branch is None:
        return git.current_branch()
    if git.has_ref(f"refs/heads/{branch}"):
        git.output("switch", "--quiet", branch)
    elif spec.is_new_branch:
        if git.has_ref(f"refs/remotes/origin/{branch}"):
            raise ApiError(409, "branch_exists", f"branch {branch!r} already exists on the remote")
        git.output("switch", "--quiet", "--no-track", "-c", branch, default_ref or "HEAD")
    else:
        fetch_branch(git, branch)
        git.output("switch", "--quiet", "--track", "-c", branch, f"origin/{branch}")
    return branch


def fetch_branch(git: Git, branch: str) -> None:
    refspec = f"+refs/heads/{branch}:refs/remotes/origin/{branch}"
    completed = git.run("fetch", "--quiet", "origin", refspec, timeout=GIT_NETWORK_TIMEOUT_SECONDS)
    if completed.returncode != 0:
        detail = git.failure(("fetch",), completed)
        raise ApiError(422, "branch_not_found", f"cannot fetch branch {branch!r}: {detail}")


# ---------------------------------------------------------------------------- checkpoints

CHECKPOINT_REF = re.compile(r"^refs/openagents/checkpoints/[A-Za-z0-9_-]{1,80}$")
CHECKPOINT_TITLE = "OpenAgents checkpoint"
CHECKPOINT_INDEX = "openagents/checkpoint.index"  # in the git dir: the checkpoints' own index
# commit-tree needs an identity; a checkpoint's is fixed (the user's config is not needed).
CHECKPOINT_IDENTITY = {
    "GIT_AUTHOR_NAME": "OpenAgents",
    "GIT_AUTHOR_EMAIL": "checkpoints@openagents.invalid",
    "GIT_COMMITTER_NAME": "OpenAgents",
    "GIT_COMMITTER_EMAIL": "checkpoints@openagents.invalid",
}


@dataclass(frozen=True)
class WorkspaceState:
    """What a checkpoint keeps: every file that is not ignored (tracked, staged, unstaged,
    untracked) as one tree, the staging area's tree, and where HEAD was."""

    worktree: str
    index: str | None  # None: the staging area had conflicts (it comes back as HEAD's tree)
    head: str | None  # None: no commit yet
    branch: str | None  # refs/heads/<name>; None: a detached HEAD
    files: int
    head_tree: str | None = None  # HEAD's tree (not recorded: a staging area equal to it is kept)

    def message(self) -> str:
        """The commit message: the facts a revert puts back, one ``Key: value`` line each."""
        return (
            f"{CHECKPOINT_TITLE}\n\n"
            f"Head: {self.head or 'none'}\n"
            f"Branch: {self.branch or 'detached'}\n"
            f"Index: {self.index or 'none'}\n"
        )


def checkpoint_ref(body: JsonObject, name: str) -> str:
    ref = required_str(body, name)
    if not CHECKPOINT_REF.match(ref):
        raise bad_request(f"{name} must be refs/openagents/checkpoints/<id>", "invalid_ref")
    return ref


@contextmanager
def checkpoint_indexes(git: Git) -> Iterator[tuple[Git, Git]]:
    """(staging, worktree): git on a private copy of the real index, outside the workspace (the
    staging area's tree; the real index is never written), and git on the checkpoints' own index
    in the git dir, kept from one checkpoint to the next (first seeded from the real one), so
    ``git add --all`` hashes only what changed since the last checkpoint, untracked files too."""
    git_dir = git.workspace.root / ".git"
    if not git_dir.is_dir():
        raise ApiError(409, "not_a_repository", "the workspace is not a git repository")
    real, kept = git_dir / "index", git_dir / CHECKPOINT_INDEX
    directory = Path(tempfile.mkdtemp(prefix="sandboxd-index-"))  # mode 0700
    try:
        if directory.resolve().is_relative_to(git.workspace.root):
            raise ApiError(500, "internal", "the temporary directory is inside the workspace")
        copy = directory / "index"
        if real.is_file():
            shutil.copyfile(real, copy)
            if not kept.is_file():
                kept.parent.mkdir(exist_ok=True)
                shutil.copyfile(real, kept)
        yield (
            Git(git.workspace, {**CHECKPOINT_IDENTITY, "GIT_INDEX_FILE": str(copy)}),
            Git(git.workspace, {**CHECKPOINT_IDENTITY, "GIT_INDEX_FILE": str(kept)}),
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def capture(git: Git, staging: Git, worktree: Git) -> WorkspaceState:
    """The workspace as it is now; ``worktree``'s index then matches the files."""
    index = staging.maybe("write-tree")  # None: the staging area has conflicts
    worktree.output("-c", "core.untrackedCache=true", "add", "--all", "--", ".")
    head = git.maybe("rev-parse", "HEAD^{commit}", "HEAD^{tree}")  # None: no commit yet
    commit, tree = head.split() if head else (None, None)
    symbolic = (git.workspace.root / ".git" / "HEAD").read_text().strip()
    return WorkspaceState(
        worktree=worktree.output("write-tree").decode().strip(),
        index=index,
        head=commit,
        branch=symbolic.removeprefix("ref: ") if symbolic.startswith("ref: ") else None,
        files=index_entries(Path(worktree.env["GIT_INDEX_FILE"])),
        head_tree=tree,
    )


def index_entries(index: Path) -> int:
    """The entry count in an index file's header (``DIRC``, version, count)."""
    with open(index, "rb") as handle:
        header = handle.read(12)
    return int.from_bytes(header[8:12], "big") if header[:4] == b"DIRC" else 0


def save_checkpoint(git: Git, committer: Git, state: WorkspaceState, ref: str) -> JsonObject:
    """One commit of ``state`` on ``ref``: its first parent is HEAD (when there is one), its
    second (when something is staged) a commit of the staging area's tree, so that tree is
    reachable too (bundles, gc)."""
    head = ("-p", state.head) if state.head else ()
    parents = [*head]
    if state.index is not None and state.index != state.head_tree:  # else HEAD keeps the tree
        staged = committer.output("commit-tree", state.index, *head, "-m", "OpenAgents index")
        parents += ["-p", staged.decode().strip()]
    commit = committer.output("commit-tree", state.worktree, *parents, "-m", state.message())
    sha = commit.decode().strip()
    git.output("update-ref", "-m", CHECKPOINT_TITLE, ref, sha)
    return {"ref": ref, "commit": sha, "files": state.files}


def read_checkpoint(git: Git, ref: str) -> WorkspaceState:
    commit = git.maybe("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit is None:
        raise ApiError(404, "checkpoint_not_found", f"no checkpoint {ref}")
    raw = git.output("cat-file", "commit", commit).decode("utf-8", "replace")
    headers, _, message = raw.partition("\n\n")
    tree = next(line.split()[1] for line in headers.splitlines() if line.startswith("tree "))
    facts = dict(
        line.split(": ", 1) for line in message.splitlines()[1:] if ": " in line
    )  # the lines after the title
    if not message.startswith(CHECKPOINT_TITLE) or "Head" not in facts:
        raise ApiError(422, "not_a_checkpoint", f"{ref} is not a checkpoint commit")
    return WorkspaceState(
        worktree=tree,
        index=None if facts.get("Index", "none") == "none" else facts["Index"],
        head=None if facts["Head"] == "none" else facts["Head"],
        branch=None if facts.get("Branch", "detached") == "detached" else facts["Branch"],
        files=0,
    )


def tree_changes(git: Git, current: str, target: str) -> tuple[list[str], list[str]]:
    """(paths the target tree writes back, paths it removes) going from ``current``."""
    raw = git.output("diff-tree", "-r", "-z", "--no-renames", "--name-status", current, target)
    fields = raw.decode("utf-8", "surrogateescape").split("\x00")
    restored: list[str] = []
    removed: list[str] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        (removed if status == "D" else restored).append(path)
    return sorted(restored), sorted(removed)


def restore_head(git: Git, state: WorkspaceState) -> None:
    """HEAD, the branch and the staging area as the checkpoint recorded them."""
    if state.branch is None:
        if state.head is not None:
            git.output("update-ref", "--no-deref", "-m", "openagents revert", "HEAD", state.head)
    else:
        if state.head is not None:
            git.output("update-ref", "-m", "openagents revert", state.branch, state.head)
        else:
            git.run("update-ref", "-d", state.branch)
        git.output("symbolic-ref", "HEAD", state.branch)
    staged = state.index or state.head
    # --reset keeps the stat data of unchanged entries: the refresh rehashes only changed files
    git.output("read-tree", *(("--reset", staged) if staged else ("--empty",)))
    git.run("update-index", "-q", "--refresh")


def git_checkpoint(app: App, request: Request) -> JsonObject:
    ref = checkpoint_ref(request.json(), "ref")
    git = Git(app.workspace)
    git.require_repository()
    with app.exclusive("checkpoint"), checkpoint_indexes(git) as (staging, worktree):
        state = capture(git, staging, worktree)
        saved = save_checkpoint(git, worktree, state, ref)
    return {**saved, "head": state.head, "branch": state.branch}


def git_revert(app: App, request: Request) -> JsonObject:
    """Put the workspace back as checkpoint ``ref`` recorded it; a real revert first saves the
    current state on ``saveRef`` (so it can be undone). Ignored files are never touched."""
    body = request.json()
    ref = checkpoint_ref(body, "ref")
    dry_run = optional_bool(body, "dryRun", False)
    save_ref = None if dry_run else checkpoint_ref(body, "saveRef")
    git = Git(app.workspace)
    git.require_repository()
    with app.exclusive("revert"):
        target = read_checkpoint(git, ref)
        with checkpoint_indexes(git) as (staging, worktree):
            current = capture(git, staging, worktree)
            restored, removed = tree_changes(git, current.worktree, target.worktree)
            if save_ref is None:
                return {"dryRun": True, "restored": restored, "removed": removed, "saved": None}
            saved = save_checkpoint(git, worktree, current, save_ref)
            # that index matches the files: --reset -u rewrites exactly the difference
            worktree.output("read-tree", "--reset", "-u", target.worktree)
        restore_head(git, target)
    log("info", "workspace.reverted", ref=ref, restored=len(restored), removed=len(removed))
    return {"dryRun": False, "restored": restored, "removed": removed, "saved": saved}


# ---------------------------------------------------------------------------- snapshot


def snapshot(app: App, request: Request) -> None:
    with app.exclusive("snapshot"):
        snapshot_id = f"snap-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:12]}"
        manifest = snapshot_facts(app.workspace, snapshot_id)
        app.manifests.put(snapshot_id, {"id": snapshot_id, "status": "streaming"})
        try:
            manifest.update(stream_archive(app.workspace, request.handler, snapshot_id))
        except BaseException as error:
            manifest["error"] = f"snapshot failed: {error!r}"
            raise
        finally:
            app.manifests.put(snapshot_id, manifest)
        if "error" not in manifest:
            # The last chunk goes out only once the manifest is readable: a client that got the
            # whole stream can always fetch it.
            request.handler.end_stream()
        log("info", "snapshot.done", **{k: v for k, v in manifest.items() if k != "gitStatus"})


def snapshot_facts(workspace: Workspace, snapshot_id: str) -> JsonObject:
    file_count, total_bytes = workspace.tally()
    git_head = git_status_text = None
    if (workspace.root / ".git").exists():
        git = Git(workspace)
        git_head = git.head()
        status = git.run("status", "--porcelain=v2", "--branch")
        git_status_text = (
            status.stdout.decode("utf-8", "replace") if status.returncode == 0 else None
        )
    return {
        "id": snapshot_id,
        "fileCount": file_count,
        "bytes": total_bytes,
        "gitHead": git_head,
        "gitStatus": git_status_text,
        "createdAt": now_iso(),
    }


def stream_archive(workspace: Workspace, handler: Handler, snapshot_id: str) -> JsonObject:
    """Stream ``tar | zstd`` as the chunked body (without its last chunk); the result holds
    the sha256 only on success."""
    env = tool_env(workspace)
    with tempfile.TemporaryFile() as tar_errors, tempfile.TemporaryFile() as zstd_errors:
        tar = spawn(
            ["tar", "-C", str(workspace.root), "--exclude=./lost+found", "-cf", "-", "."],
            stdout=subprocess.PIPE,
            stderr=tar_errors,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        zstd = spawn(
            ["zstd", "-3", "-T0", "-q", "-c"],
            stdin=tar.stdout,
            stdout=subprocess.PIPE,
            stderr=zstd_errors,
            env=env,
        )
        cast(IO[bytes], tar.stdout).close()
        digest, archive_bytes, disconnected = pump_archive(zstd, handler, snapshot_id)
        if disconnected:
            kill_all(tar, zstd)
            problem: str | None = "client disconnected"
        else:
            # tar exits 1 when a file changed while it was read: the archive is still sound.
            tar_step: PipelineStep = ("tar", tar, tar_errors, (0, 1))
            problem = pipeline_problem(tar_step, ("zstd", zstd, zstd_errors, (0,)))
    if problem is not None:
        log("error", "snapshot.failed", id=snapshot_id, error=problem)
        return {"error": problem, "archiveBytes": archive_bytes}
    return {"archiveBytes": archive_bytes, "sha256": digest}


def pump_archive(
    zstd: subprocess.Popen[bytes], handler: Handler, snapshot_id: str
) -> tuple[str, int, bool]:
    hasher = hashlib.sha256()
    sent = 0
    source = cast(IO[bytes], zstd.stdout)
    handler.start_stream("application/zstd", {"X-Snapshot-Id": snapshot_id})
    try:
        while chunk := os.read(source.fileno(), CHUNK_BYTES):
            hasher.update(chunk)
            sent += len(chunk)
            handler.write_chunk(chunk)
    except OSError:
        return hasher.hexdigest(), sent, True
    finally:
        source.close()
    return hasher.hexdigest(), sent, False


PipelineStep = tuple[str, "subprocess.Popen[bytes]", IO[bytes], tuple[int, ...]]


def pipeline_problem(*steps: PipelineStep) -> str | None:
    """The first failed step's stderr, or None when every step exited with an accepted code."""
    problems = []
    for name, process, errors, accepted in steps:
        code = process.wait()
        if code not in accepted:
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip()[-2000:]
            problems.append(f"{name} exited with {code}: {message}")
    return "; ".join(problems) or None


def kill_all(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


def get_manifest(app: App, request: Request) -> JsonObject:
    match = MANIFEST_ROUTE.match(request.path)
    manifest = app.manifests.get(match.group(1)) if match else None
    if manifest is None:
        raise ApiError(404, "not_found", "no such snapshot (manifests are kept in memory)")
    if manifest.get("status") == "streaming":
        raise ApiError(409, "snapshot_in_progress", "the snapshot is still streaming")
    return manifest


# ---------------------------------------------------------------------------- restore


def restore(app: App, request: Request) -> JsonObject:
    expected = (request.header("X-Expected-Sha256") or "").strip().lower()
    if not SHA256_HEX.match(expected):
        raise bad_request("X-Expected-Sha256 must be a sha256 hex digest", "missing_checksum")
    workspace = app.workspace
    with app.exclusive("restore"):
        if not workspace.is_empty():
            raise ApiError(409, "workspace_not_empty", "restore needs an empty workspace")
        try:
            digest, problem = unpack_archive(workspace, request.body())
        except BaseException:
            workspace.empty()
            raise
        if digest != expected or problem is not None:
            workspace.empty()
            raise restore_failure(digest, expected, problem)
        file_count, total_bytes = workspace.tally()
        git_head = Git(workspace).head() if (workspace.root / ".git").exists() else None
    log("info", "restore.done", fileCount=file_count, bytes=total_bytes, sha256=digest)
    return {"fileCount": file_count, "bytes": total_bytes, "sha256": digest, "gitHead": git_head}


def restore_failure(digest: str, expected: str, problem: str | None) -> ApiError:
    if digest != expected:
        message = f"checksum mismatch: received {digest}, expected {expected}"
        return ApiError(422, "checksum_mismatch", message)
    return ApiError(422, "archive_rejected", f"archive rejected: {problem}")


def unpack_archive(workspace: Workspace, chunks: Iterator[bytes]) -> tuple[str, str | None]:
    """Feed the body to ``zstd -d | tar -x`` while hashing it: (sha256, problem or None)."""
    env = tool_env(workspace)
    with tempfile.TemporaryFile() as tar_errors, tempfile.TemporaryFile() as zstd_errors:
        zstd = spawn(
            ["zstd", "-d", "-q", "-c"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=zstd_errors,
            env=env,
        )
        tar = spawn(
            ["tar", "-C", str(workspace.root), "-xf", "-", "--no-same-owner", "--no-overwrite-dir"],
            stdin=zstd.stdout,
            stdout=subprocess.DEVNULL,
            stderr=tar_errors,
            env=env,
        )
        cast(IO[bytes], zstd.stdout).close()
        try:
            digest = feed(cast(IO[bytes], zstd.stdin), chunks)
        except BaseException:
            kill_all(zstd, tar)
            raise
        problem = pipeline_problem(
            ("zstd", zstd, zstd_errors, (0,)), ("tar", tar, tar_errors, (0,))
        ) or unsafe_members(tar_errors)
    return digest, problem


def feed(sink: IO[bytes], chunks: Iterator[bytes]) -> str:
    """Hash every chunk and write it while the pipe accepts; keep reading after it breaks."""
    hasher = hashlib.sha256()
    writable = True
    for chunk in chunks:
        hasher.update(chunk)
        if writable:
            try:
                sink.write(chunk)
            except BrokenPipeError:
                writable = False
    with suppress(BrokenPipeError):
        sink.close()
    return hasher.hexdigest()


def unsafe_members(tar_errors: IO[bytes]) -> str | None:
    """GNU tar strips a leading '/' or '../' with only a warning: treat it as a refusal."""
    tar_errors.seek(0)
    message = tar_errors.read().decode("utf-8", "replace")
    if "Removing leading" in message:
        return "absolute or '..' member paths: " + message.strip()[-2000:]
    return None


# ---------------------------------------------------------------------------- main

ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/health"): health,
    ("POST", "/exec"): exec_command,
    ("GET", "/files"): list_files,
    ("GET", "/files/content"): read_file,
    ("PUT", "/files/content"): write_file,
    ("POST", "/workspace/prepare"): prepare_workspace,
    ("GET", "/git/branch"): git_branch,
    ("GET", "/git/status"): git_status,
    ("GET", "/git/diff"): git_diff,
    ("POST", "/git/checkpoint"): git_checkpoint,
    ("POST", "/git/revert"): git_revert,
    ("POST", "/snapshot"): snapshot,
    ("POST", "/restore"): restore,
    ("POST", "/sync"): sync,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="sandboxd: the daemon inside a sandbox")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--unix", default=None, help="listen on this Unix socket instead")
    parser.add_argument("--label", default=None, help="what this sandbox serves (ps, logs)")
    parser.add_argument(
        "--token-stdin",
        action="store_true",
        help="read the token from the first line of stdin (it never sits in /proc/*/environ)",
    )
    parser.add_argument("--workspace", required=True, type=Path)
    return parser.parse_args(argv)


def stop_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = os.environ.pop("SANDBOXD_TOKEN", "")  # children never inherit it
    if args.token_stdin:
        token = sys.stdin.readline().strip()
        sys.stdin.close()
    if not token:
        log("error", "startup.failed", reason="SANDBOXD_TOKEN is required")
        return 2
    args.workspace.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(Path(os.path.realpath(args.workspace)))
    app = App(workspace, hashlib.sha256(token.encode()).digest())
    server: SandboxServer | UnixSandboxServer
    if args.unix:
        server = UnixSandboxServer(args.unix, app)
        ready: JsonObject = {"ready": True, "socket": args.unix}
    else:
        server = SandboxServer((args.host, args.port), app)
        ready = {"ready": True, "port": server.server_address[1]}
    signal.signal(signal.SIGTERM, stop_on_signal)
    print(json.dumps(ready), flush=True)
    log(
        "info",
        "listening",
        **{k: v for k, v in ready.items() if k != "ready"},
        workspace=str(workspace.root),
    )
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        log("info", "stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
