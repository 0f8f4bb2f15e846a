"""Fixtures: the real sandboxd as a subprocess on 127.0.0.1 (port 0) in a temporary workspace,
and a local bare repository with a default branch ``main`` and a branch ``feature``."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import select
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from openagents.sandbox.answers import PreparedWorkspace
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.local import SANDBOXD_MODULE

SANDBOXD = Path(__file__).resolve().parents[2] / "sandbox" / "sandboxd"
# sandboxd as every driver starts it: ``python3 -P -m sandboxd``, its parent on PYTHONPATH
SANDBOXD_ARGV = [sys.executable, *SANDBOXD_MODULE]
SANDBOXD_ENV = {"PYTHONPATH": str(SANDBOXD.parent)}
READY_TIMEOUT_SECONDS = 10.0

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Seed Author",
    "GIT_AUTHOR_EMAIL": "seed@example.com",
    "GIT_COMMITTER_NAME": "Seed Author",
    "GIT_COMMITTER_EMAIL": "seed@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass
class RunningSandbox:
    process: subprocess.Popen[str]
    workspace: Path
    endpoint: str
    token: str
    log_path: Path
    tmpdir: Path

    @property
    def client(self) -> SandboxClient:
        return SandboxClient(self.endpoint, self.token, timeout=20)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


StartSandbox = Callable[..., RunningSandbox]


def start_sandboxd(base: Path, extra_path: Path | None = None) -> RunningSandbox:
    """Start sandboxd with a minimal environment and wait for its ready line."""
    for name in ("workspace", "tmp", "home"):
        (base / name).mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = {
        "PATH": f"{extra_path}:{path}" if extra_path else path,
        "HOME": str(base / "home"),
        "TMPDIR": str(base / "tmp"),
        "SANDBOXD_TOKEN": token,
        **SANDBOXD_ENV,
    }
    log_path = base / "sandboxd.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [*SANDBOXD_ARGV, "--host", "127.0.0.1", "--port", "0",
             "--workspace", str(base / "workspace")],
            stdout=subprocess.PIPE, stderr=log, env=env, text=True,
        )  # fmt: skip
    ready = read_ready_line(process)
    return RunningSandbox(
        process=process,
        workspace=(base / "workspace").resolve(),
        endpoint=f"http://127.0.0.1:{ready['port']}",
        token=token,
        log_path=log_path,
        tmpdir=base / "tmp",
    )


def read_ready_line(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_SECONDS)
    line = process.stdout.readline() if readable else ""
    if not line:
        process.kill()
        raise RuntimeError("sandboxd did not become ready")
    ready: dict[str, Any] = json.loads(line)
    assert ready["ready"] is True
    assert isinstance(ready["port"], int)
    assert ready["port"] > 0
    return ready


@pytest.fixture
def start_sandbox(tmp_path: Path) -> Iterator[StartSandbox]:
    """A factory: each call starts one more daemon with its own workspace."""
    started: list[RunningSandbox] = []

    def start(name: str = "main", extra_path: Path | None = None) -> RunningSandbox:
        running = start_sandboxd(tmp_path / name, extra_path)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def sandbox(start_sandbox: StartSandbox) -> RunningSandbox:
    return start_sandbox()


@pytest.fixture
def client(sandbox: RunningSandbox) -> SandboxClient:
    return sandbox.client


# ---------------------------------------------------------------------------- raw HTTP


def raw_call(
    endpoint: str,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
) -> tuple[int, dict[str, Any]]:
    """One request without the client: (status, JSON body)."""
    url = endpoint + path  # always a local http URL
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


# ---------------------------------------------------------------------------- git remotes


class CredentialRecorder(BaseHTTPRequestHandler):
    """A git HTTP remote that asks for credentials, records any it gets, then says not found."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        authorization = self.headers.get("Authorization")
        if authorization is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
        else:
            self.seen.append(authorization)
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def credential_remote() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), CredentialRecorder)
    CredentialRecorder.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/owner/repo.git"
    server.shutdown()
    server.server_close()


# ---------------------------------------------------------------------------- git


def git(*args: str, cwd: Path) -> str:
    completed = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


@dataclass(frozen=True)
class Origin:
    bare: Path
    main_head: str
    feature_head: str

    @property
    def url(self) -> str:
        return str(self.bare)


@pytest.fixture(scope="session")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Origin:
    """A bare repository: ``main`` (README, src/app.py, docs, a lock file) and ``feature``."""
    root = tmp_path_factory.mktemp("origin")
    bare, seed = root / "origin.git", root / "seed"
    git("init", "--quiet", "--bare", "-b", "main", str(bare), cwd=root)
    git("init", "--quiet", "-b", "main", str(seed), cwd=root)
    files = {
        "README.md": "# Demo\n\nA small project.\n",
        "src/app.py": "def main():\n    return 1\n\n\nprint(main())\n",
        "docs/old.txt": "line one\nline two\nline three\n",
        "docs/guide.md": "# Guide\n\nRead me first.\nThen read the rest.\n",
        "package-lock.json": '{\n  "lockfileVersion": 3\n}\n',
    }
    for relative, text in files.items():
        (seed / relative).parent.mkdir(parents=True, exist_ok=True)
        (seed / relative).write_text(text)
    git("add", "-A", cwd=seed)
    git("commit", "--quiet", "-m", "initial", cwd=seed)
    git("remote", "add", "origin", str(bare), cwd=seed)
    git("push", "--quiet", "origin", "main", cwd=seed)
    git("switch", "--quiet", "-c", "feature", cwd=seed)
    (seed / "feature.txt").write_text("feature work\n")
    git("add", "feature.txt", cwd=seed)
    git("commit", "--quiet", "-m", "feature", cwd=seed)
    git("push", "--quiet", "origin", "feature", cwd=seed)
    return Origin(
        bare=bare,
        main_head=git("rev-parse", "main", cwd=seed),
        feature_head=git("rev-parse", "feature", cwd=seed),
    )


def prepare(
    client: SandboxClient, origin: Origin, branch: str | None, new: bool = False
) -> PreparedWorkspace:
    return client.prepare_workspace(
        origin.url,
        branch=branch,
        is_new_branch=new,
        git_name="Ada Agent",
        git_email="ada@example.com",
    )


# ---------------------------------------------------------------------------- trees


def tree_digest(root: Path) -> dict[str, str]:
    """relative path → a fingerprint of type, content (or link target) and executable bit."""
    fingerprint: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            fingerprint[relative] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            fingerprint[relative] = "dir"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            fingerprint[relative] = f"file:{digest}:{os.access(path, os.X_OK)}"
    return fingerprint
