"""A real smart-HTTP git server on 127.0.0.1 for tests: ``git http-backend`` (CGI) behind a tiny
threaded HTTP server, serving the bare repositories under ``root`` (``/<owner>/<name>.git``)
only to basic auth ``x-access-token:<token>`` (anything else: 401). It records each request's
method, path and whether its credentials were right."""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

HTTP_BACKEND = "http-backend"


@dataclass
class GitHttpServer:
    root: Path
    token: str
    url: str = ""  # http://127.0.0.1:<port>
    seen: list[tuple[str, str, bool]] = field(default_factory=list)

    def repo_url(self, owner: str, name: str) -> str:
        return f"{self.url}/{owner}/{name}.git"


class _Handler(BaseHTTPRequestHandler):
    server_state: ClassVar[GitHttpServer]

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        state = self.server_state
        expected = base64.b64encode(f"x-access-token:{state.token}".encode()).decode()
        authorized = self.headers.get("Authorization") == f"Basic {expected}"
        path, _, query = self.path.partition("?")
        state.seen.append((self.command, path, authorized))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if not authorized:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(state.root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_PROJECT_ROOT": str(state.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        done = subprocess.run(
            ["git", HTTP_BACKEND], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name.strip(), value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def git_http_server(root: Path, token: str) -> Iterator[GitHttpServer]:
    state = GitHttpServer(root=root, token=token)
    handler = type("Handler", (_Handler,), {"server_state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
