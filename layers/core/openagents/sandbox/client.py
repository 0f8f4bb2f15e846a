"""A client for sandboxd, the daemon inside every sandbox (protocol: ``sandbox/README.md``).

Standard library only (urllib): it ships in the core Lambda layer. An endpoint is an
``http(s)://`` URL (Fargate: the task's private IP) or ``http+unix://<quoted socket path>``
(the one-machine driver: a Unix socket bind-mounted out of the sandbox's network namespace,
in a folder the sandbox owns: connected to without following links, only when it is a socket
owned by the folder's owner — ``_connect_unix``).
Every failure is a ``SandboxError`` with a readable message starting ``sandbox request
failed:``. When sandboxd answered with an error, the exception (a ``SandboxRequestError``)
carries ``status`` and sandboxd's machine ``code`` and reads ``… status code 404 not_found:
…``; when it could not be reached or timed out, ``status`` is None.

No answer is read without a cap, because code in a sandbox can replace sandboxd on its socket:
a JSON answer at most ``MAX_ANSWER_BYTES`` (64 MiB) within the call's timeout, an error's body
at most ``MAX_ERROR_BYTES`` (64 KiB) within ``ERROR_READ_SECONDS`` (``read_capped``: ``read1``,
so a trickle is seen), a bundle at most the caller's ``max_bytes``. Past a cap the call fails
with a ``SandboxError``.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import socket
import stat
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPException, HTTPResponse
from typing import Any, BinaryIO, Protocol, cast
from urllib.parse import quote, unquote, urlencode, urlsplit

from openagents.domain.checkpoints import Checkpoint
from openagents.sandbox import answers
from openagents.sandbox.answers import (
    ExecResult,
    FileContent,
    FileList,
    FileWritten,
    GitDiff,
    GitStatus,
    Health,
    PreparedWorkspace,
    Restored,
    Reverted,
    SnapshotManifest,
    Synced,
)
from openagents.sandbox.exec_stream import ExecPiece, read_pieces
from openagents.sandbox.git_answers import GitBranch, GitPlace, GitRemote
from openagents.sandbox.port import SandboxError
from openagents.sandbox.ports import (
    ListeningPort,
    connect_endpoint,
    parse_ports,
    read_head,
    tunnel_request,
)

CHUNK_BYTES = 1 << 20
NETWORK_TIMEOUT_SECONDS = 660.0  # a clone may take up to sandboxd's 600 s limit
EXEC_MARGIN_SECONDS = 15.0
CHECKPOINT_TIMEOUT = 120.0  # git add -A of a large workspace (sandboxd's own git limit: 60 s)
# An answer is the sandbox's word: a sandbox can replace sandboxd (its socket folder is its
# own), so no answer may exhaust the control plane: a JSON answer (the largest: a diff, or an
# exec's capped output) or an error is read up to its cap and within the call's timeout.
MAX_ANSWER_BYTES = 64 << 20
MAX_ERROR_BYTES = 64 << 10
ERROR_READ_SECONDS = 10.0
ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_DETAIL_CHARS = 2000
BUNDLE_TYPE = "application/x-git-bundle"
BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")

JsonObject = dict[str, Any]
UNIX_SCHEME = "http+unix"


def unix_endpoint(socket_path: str) -> str:
    """The endpoint of a sandboxd listening on a Unix socket."""
    return f"{UNIX_SCHEME}://{quote(socket_path, safe='')}"


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: the "host" is the quoted socket path."""

    def __init__(self, host: str, *, timeout: float | None = None, **_: Any) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = unquote(host)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            _connect_unix(sock, self._socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _connect_unix(sock: socket.socket, path: str) -> None:
    """Connect to the socket at ``path`` without following a link: the sandbox owns the socket's
    folder and may plant a link (or a host socket's hard link) there in its place. The folder
    is opened with O_NOFOLLOW, the socket relative to it with O_PATH|O_NOFOLLOW (a planted link
    is then opened as the link itself), checked to be a socket owned by the folder's owner (the
    sandbox's uid), and connected to through ``/proc/self/fd/N``, the very inode checked (also
    short: no socket address limit)."""
    folder, name = os.path.split(path)
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        socket_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
        try:
            check_socket(path, os.fstat(folder_fd), os.fstat(socket_fd))
            sock.connect(f"/proc/self/fd/{socket_fd}")
        finally:
            os.close(socket_fd)
    finally:
        os.close(folder_fd)


class UnsafeSocket(OSError):
    """What sits at sandboxd's socket path is not the sandbox's own socket: refused."""


def check_socket(path: str, folder: os.stat_result, found: os.stat_result) -> None:
    if stat.S_ISLNK(found.st_mode):
        raise UnsafeSocket(f"{path} is a symbolic link, not sandboxd's socket: refused")
    if not stat.S_ISSOCK(found.st_mode):
        raise UnsafeSocket(f"{path} is not a socket: refused")
    if found.st_uid != folder.st_uid:
        raise UnsafeSocket(
            f"{path} is owned by uid {found.st_uid}, not by its folder's owner (uid "
            f"{folder.st_uid}, the sandbox's): refused"
        )


class _UnixHandler(urllib.request.AbstractHTTPHandler):
    def http_unix_open(self, request: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_UnixConnection, request)

    http_unix_request = urllib.request.AbstractHTTPHandler.do_request_


# urllib looks handlers up by "<scheme>_open"; the scheme has a "+"
setattr(_UnixHandler, f"{UNIX_SCHEME}_open", _UnixHandler.http_unix_open)
setattr(_UnixHandler, f"{UNIX_SCHEME}_request", _UnixHandler.http_unix_request)
# … and so are response processors: non-2xx answers raise HTTPError, as they do over http
setattr(_UnixHandler, f"{UNIX_SCHEME}_response", urllib.request.HTTPErrorProcessor.http_response)


class SandboxRequestError(SandboxError):
    """sandboxd answered with a non-2xx status (always set here)."""

    status: int

    def __init__(
        self, message: str, status: int, code: str | None, detail: str | None = None
    ) -> None:
        super().__init__(message, status=status, code=code, detail=detail)


class SandboxClient:
    """One method per sandboxd endpoint. ``timeout`` bounds each network wait, in seconds."""

    def __init__(self, endpoint: str, token: str, timeout: float = 30) -> None:
        scheme = urlsplit(endpoint).scheme
        if scheme not in ("http", "https", UNIX_SCHEME):
            raise SandboxError(f"sandbox endpoint must be an http(s) URL, got {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self._opener = (
            urllib.request.build_opener(_UnixHandler)
            if scheme == UNIX_SCHEME
            else urllib.request.build_opener()
        )
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:  # never show the token
        return f"SandboxClient({self.endpoint!r})"

    # ------------------------------------------------------------------ health, exec

    def health(self) -> Health:
        return Health.from_answer(self._json("GET", "/health"))

    def exec(
        self,
        command: str | None = None,
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> ExecResult:
        """Run a shell command (``bash -lc``) or an argv: its exit code, output, …
        With ``key``, once per key: a repeat answers the first run's result (sandbox/README.md)."""
        body: JsonObject = {
            "command": command,
            "argv": argv,
            "cwd": cwd,
            "env": env,
            "timeoutSeconds": timeout_seconds,
            "maxOutputBytes": max_output_bytes,
        }
        if key is not None:
            body["key"] = key
        wait = max(self.timeout, timeout_seconds + EXEC_MARGIN_SECONDS)
        return ExecResult.from_answer(self._json("POST", "/exec", body, timeout=wait))

    def exec_stream(
        self,
        command: str | None = None,
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_seconds: float = 60,
        max_output_bytes: int = 1 << 20,
        key: str | None = None,
    ) -> Iterator[ExecPiece]:
        """``exec`` with its output as it comes: ``ExecOutput`` pieces while the command runs,
        then one ``ExecDone`` with the result ``exec`` answers (``sandbox/exec_stream.py``: every
        frame checked and capped). Closing the iterator early drops the connection; the command
        runs on to its end or its timeout."""
        body: JsonObject = {
            "command": command,
            "argv": argv,
            "cwd": cwd,
            "env": env,
            "timeoutSeconds": timeout_seconds,
            "maxOutputBytes": max_output_bytes,
            "stream": True,
        }
        if key is not None:
            body["key"] = key
        wait = max(self.timeout, timeout_seconds + EXEC_MARGIN_SECONDS)
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        with self._open("POST", "/exec", data, headers, wait) as response:
            yield from read_pieces(response, max_output_bytes=max_output_bytes, seconds=wait)

    # ------------------------------------------------------------------ files

    def list_files(self, path: str = ".", depth: int = 1) -> FileList:
        query: dict[str, str | int] = {"path": path, "depth": depth}
        return FileList.from_answer(self._json("GET", "/files", query=query))

    def read_file(self, path: str, max_bytes: int = 1 << 20) -> FileContent:
        query: dict[str, str | int] = {"path": path, "maxBytes": max_bytes}
        return FileContent.from_answer(self._json("GET", "/files/content", query=query))

    def read_bytes(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        """The file's (first ``max_bytes``) bytes, whichever encoding sandboxd chose."""
        answer = self.read_file(path, max_bytes)
        if answer.encoding == "base64":
            return base64.b64decode(answer.content)
        return answer.content.encode("utf-8")

    def write_file(self, path: str, content: str | bytes) -> FileWritten:
        """Write text (UTF-8) or bytes (sent as base64); parent directories are created."""
        if isinstance(content, bytes):
            body = {
                "path": path,
                "content": base64.b64encode(content).decode(),
                "encoding": "base64",
            }
        else:
            body = {"path": path, "content": content, "encoding": "utf-8"}
        return FileWritten.from_answer(self._json("PUT", "/files/content", body))

    # ------------------------------------------------------------------ git

    def prepare_workspace(
        self,
        clone_url: str,
        branch: str | None,
        is_new_branch: bool,
        git_name: str,
        git_email: str,
    ) -> PreparedWorkspace:
        """Clone anonymously and check out (idempotent). A private repository is never cloned
        here: the control plane fetches it and hands it over with ``git_bundle_restore``."""
        body = {
            "cloneUrl": clone_url,
            "branch": branch,
            "isNewBranch": is_new_branch,
            "gitName": git_name,
            "gitEmail": git_email,
        }
        wait = max(self.timeout, NETWORK_TIMEOUT_SECONDS)
        return PreparedWorkspace.from_answer(
            self._json("POST", "/workspace/prepare", body, timeout=wait)
        )

    def git_branch(self) -> GitBranch:
        return GitBranch.from_answer(self._json("GET", "/git/branch"))

    def git_status(self) -> GitStatus:
        return GitStatus.from_answer(self._json("GET", "/git/status"))

    def git_diff(self) -> GitDiff:
        return GitDiff.from_answer(self._json("GET", "/git/diff"))

    def checkpoint(self, ref: str) -> Checkpoint:
        """Save the workspace (every file git does not ignore, the staging area, HEAD) as a
        commit on ``ref`` (``refs/openagents/checkpoints/<id>``)."""
        body = {"ref": ref}
        return answers.checkpoint(
            self._json("POST", "/git/checkpoint", body, timeout=CHECKPOINT_TIMEOUT)
        )

    def revert(self, ref: str, *, save_ref: str | None, dry_run: bool) -> Reverted:
        """Put the workspace back as checkpoint ``ref`` holds it, first saving the current state
        on ``save_ref`` (none for a dry run)."""
        body = {"ref": ref, "saveRef": save_ref, "dryRun": dry_run}
        return Reverted.from_answer(
            self._json("POST", "/git/revert", body, timeout=CHECKPOINT_TIMEOUT)
        )

    # ------------------------------------------------------------------ git publishing

    def git_remote(self) -> GitRemote:
        """Origin's default branch and the current branch's upstream."""
        return GitRemote.from_answer(self._json("GET", "/git/remote"))

    def git_commit(self, message: str, git_name: str, git_email: str) -> GitPlace:
        """``git add --all`` and one commit; a SandboxRequestError (422 ``git_failed``, git's
        words in ``detail``) when git refuses, e.g. nothing to commit."""
        body = {"message": message, "gitName": git_name, "gitEmail": git_email}
        return GitPlace.from_answer(
            self._json("POST", "/git/commit", body, timeout=CHECKPOINT_TIMEOUT)
        )

    def git_upstream(self, branch: str, commit: str) -> None:
        """Record ``commit`` as origin's ``branch``, the branch's upstream (what a push records)."""
        self._json("POST", "/git/upstream", {"branch": branch, "commit": commit})

    def git_archive(self) -> GitPlace:
        """Keep the uncommitted work (staging area, working tree) on hidden refs, for a bundle
        of every ref; HEAD, the branch and the index stay as they are."""
        return GitPlace.from_answer(
            self._json("POST", "/git/archive", {}, timeout=CHECKPOINT_TIMEOUT)
        )

    def git_bundle(self, *, branch: str | None = None, thin: bool = False, max_bytes: int) -> bytes:
        """A git bundle of every ref (``branch`` None) or of one branch (``thin``: only what
        origin lacks, when git can make that), streamed; a SandboxError when the stream is cut
        or grows past ``max_bytes``."""
        body = json.dumps({"branch": branch, "thin": thin}).encode()
        headers = {"Content-Type": "application/json"}
        wait = max(self.timeout, NETWORK_TIMEOUT_SECONDS)
        data = bytearray()
        with self._open("POST", "/git/bundle", body, headers, wait) as response:
            for chunk in self._chunks(response, "git bundle"):
                data += chunk
                if len(data) > max_bytes:
                    raise SandboxError(
                        f"sandbox request failed: the bundle exceeds {max_bytes} bytes"
                    )
        if not data.startswith(BUNDLE_SIGNATURES):  # the sandbox is hostile: a bundle or nothing
            raise SandboxError("sandbox request failed: sandboxd answered no git bundle")
        return bytes(data)

    def git_bundle_restore(
        self,
        data: bytes,
        *,
        place: GitPlace,
        remote: GitRemote,
        clone_url: str | None,
        git_name: str,
        git_email: str,
    ) -> GitPlace:
        """Rebuild the repository from a bundle in the empty workspace: HEAD at ``place``, an
        archive's work checked out and staged as it was (a clone's bundle: HEAD's files),
        origin and upstream."""
        query = {
            "branch": place.branch or "",
            "head": place.head or "",
            "upstream": remote.upstream or "",
            "originHead": remote.origin_head or "",
            "cloneUrl": clone_url or "",
            "gitName": git_name,
            "gitEmail": git_email,
        }
        headers = {
            "X-Expected-Sha256": hashlib.sha256(data).hexdigest(),
            "Content-Type": BUNDLE_TYPE,
        }
        target = f"/git/bundle/restore?{urlencode(query)}"
        wait = max(self.timeout, NETWORK_TIMEOUT_SECONDS)
        with self._open("POST", target, data, headers, wait) as response:
            return GitPlace.from_answer(self._decode(response, "POST /git/bundle/restore", wait))

    # ------------------------------------------------------------------ snapshot, restore

    def snapshot_to(self, out: BinaryIO) -> SnapshotManifest:
        """Stream the workspace archive into ``out`` and return its verified manifest.

        Raises SandboxError when the stream breaks or the manifest disagrees with the bytes
        received (sha256 and size), so a returned manifest always describes ``out``'s bytes.
        """
        hasher = hashlib.sha256()
        received = 0
        with self._open("POST", "/snapshot", b"") as response:
            snapshot_id = response.headers.get("X-Snapshot-Id") or ""
            for chunk in self._chunks(response, f"snapshot {snapshot_id}"):
                hasher.update(chunk)
                received += len(chunk)
                out.write(chunk)
        manifest = self.snapshot_manifest(snapshot_id)
        verify_manifest(manifest, hasher.hexdigest(), received)
        return manifest

    def snapshot_manifest(self, snapshot_id: str) -> SnapshotManifest:
        path = f"/snapshots/{quote(snapshot_id, safe='')}/manifest"
        return SnapshotManifest.from_answer(self._json("GET", path))

    def restore_from(self, src: BinaryIO, expected_sha256: str) -> Restored:
        """Stream an archive from ``src`` (chunked) into the sandbox's empty workspace."""
        headers = {"X-Expected-Sha256": expected_sha256, "Content-Type": "application/zstd"}
        wait = max(self.timeout, NETWORK_TIMEOUT_SECONDS)
        with self._open("POST", "/restore", read_chunks(src), headers, wait) as response:
            return Restored.from_answer(self._decode(response, "POST /restore", wait))

    def sync(self) -> Synced:
        return Synced.from_answer(self._json("POST", "/sync", {}))

    # ------------------------------------------------------------------ ports, tunnels

    def ports(self) -> list[ListeningPort]:
        """The TCP ports listening in the sandbox (validated: ``sandbox/ports.py``)."""
        return parse_ports(self._json("GET", "/ports"))

    def open_tunnel(self, port: int) -> socket.socket:
        """A socket carrying bytes to and from ``port`` inside the sandbox, through sandboxd's
        ``Upgrade: tcp`` (over its Unix socket on one machine, its TCP endpoint on Fargate).
        A ``SandboxRequestError`` 404 ``port_not_listening`` when nothing listens there."""
        what = f"GET /ports/{port}/tunnel"
        try:
            sock, host = connect_endpoint(self.endpoint, _connect_unix, self.timeout)
        except OSError as error:
            raise transport_failure(error, what) from error
        try:
            sock.sendall(tunnel_request(port, self._token, host))
            status, _, rest = read_head(sock)
            if status != 101:
                code = "port_not_listening" if status == 404 else None
                raise SandboxRequestError(
                    f"sandbox request failed: status code {status} ({what})", status, code
                )
            if rest:  # a server that speaks first: not an HTTP server, and not ours to guess
                raise SandboxError(f"sandbox request failed: {what} sent bytes ahead")
            sock.settimeout(None)
            return sock
        except OSError as error:
            sock.close()
            raise transport_failure(error, what) from error
        except BaseException:
            sock.close()
            raise

    # ------------------------------------------------------------------ plumbing

    def _json(
        self,
        method: str,
        path: str,
        body: JsonObject | None = None,
        *,
        query: dict[str, str | int] | None = None,
        timeout: float | None = None,
    ) -> JsonObject:
        target = f"{path}?{urlencode(query)}" if query else path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        with self._open(method, target, data, headers, timeout) as response:
            return self._decode(response, f"{method} {path}", timeout)

    def _open(
        self,
        method: str,
        target: str,
        data: bytes | Iterator[bytes] | None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> HTTPResponse:
        request = urllib.request.Request(  # noqa: S310 - __init__ allows only http(s)
            self.endpoint + target,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self._token}", **(headers or {})},
        )
        what = f"{method} {urlsplit(target).path}"
        try:
            response = self._opener.open(request, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as error:
            raise http_failure(error, what) from None
        except (urllib.error.URLError, OSError, HTTPException) as error:
            raise transport_failure(error, what) from error
        return cast(HTTPResponse, response)

    def _decode(self, response: HTTPResponse, what: str, timeout: float | None) -> JsonObject:
        try:
            body = read_capped(response, MAX_ANSWER_BYTES, timeout or self.timeout)
            value = json.loads(body)
        except (OSError, HTTPException) as error:
            raise transport_failure(error, what) from error
        except AnswerTooLarge as error:
            raise SandboxError(f"sandbox request failed: {what} {error}") from None
        except ValueError as error:
            raise SandboxError(f"sandbox request failed: invalid JSON from {what}") from error
        if not isinstance(value, dict):
            raise SandboxError(f"sandbox request failed: {what} did not answer an object")
        return value

    def _chunks(self, response: HTTPResponse, what: str) -> Iterator[bytes]:
        try:
            while chunk := response.read(CHUNK_BYTES):
                yield chunk
        except (OSError, HTTPException) as error:
            raise transport_failure(error, f"{what}: the stream broke") from error


class AnswerTooLarge(Exception):
    """An answer past its cap, or still arriving when the call's time is up."""


class Readable(Protocol):
    def read1(self, amount: int, /) -> bytes: ...


def read_capped(response: Readable, limit: int, seconds: float) -> bytes:
    """The whole body, refused past ``limit`` bytes or ``seconds`` after its first byte was
    asked for. Each read returns what one receive brought (``read1``: a trickle is seen), and
    waits at most the socket's timeout."""
    deadline = time.monotonic() + seconds
    data = bytearray()
    while chunk := response.read1(min(CHUNK_BYTES, limit + 1 - len(data))):
        data += chunk
        if len(data) > limit:
            raise AnswerTooLarge(f"answered more than {limit} bytes")
        if time.monotonic() > deadline:
            raise AnswerTooLarge(f"was still answering after {seconds:g} s")
    return bytes(data)


def read_chunks(source: BinaryIO) -> Iterator[bytes]:
    while chunk := source.read(CHUNK_BYTES):
        yield chunk


def verify_manifest(manifest: SnapshotManifest, sha256: str, size: int) -> None:
    if manifest.error:
        raise SandboxError(f"sandbox snapshot failed: {manifest.error}")
    if manifest.sha256 != sha256 or manifest.archive_bytes != size:
        raise SandboxError(
            "sandbox snapshot failed verification: received "
            f"{size} bytes with sha256 {sha256}, manifest says "
            f"{manifest.archive_bytes} bytes with sha256 {manifest.sha256}"
        )


def http_failure(error: urllib.error.HTTPError, what: str) -> SandboxRequestError:
    code: str | None = None
    detail = error.reason
    try:
        payload = json.loads(read_capped(error, MAX_ERROR_BYTES, ERROR_READ_SECONDS))
        said_code, said = payload.get("code"), payload.get("error", detail)
        # the sandbox's words: a machine code is a short identifier, a detail a bounded string
        code = said_code if isinstance(said_code, str) and ERROR_CODE.fullmatch(said_code) else None
        detail = said[:MAX_DETAIL_CHARS] if isinstance(said, str) else detail
    except (ValueError, OSError, HTTPException, AttributeError, AnswerTooLarge):
        pass
    finally:
        error.close()
    label = f"{code}: " if code else ""
    message = f"sandbox request failed: status code {error.code} {label}{detail} ({what})"
    return SandboxRequestError(message, error.code, code, str(detail))


def transport_failure(error: BaseException, what: str) -> SandboxError:
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, TimeoutError):
        return SandboxError(f"sandbox request failed: timed out ({what})")
    return SandboxError(f"sandbox request failed: connection error ({what}): {reason}")
