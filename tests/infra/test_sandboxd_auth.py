"""sandboxd as the Fargate task runs it: every route, /health included, demands the sandbox's
own per-generation token before anything else happens.

The security group lets only the control plane reach sandboxd's port, but the token is the
second wall (a misconfigured group, a peered VPC, another ENI in the subnet). The route table
is read from the ``sandbox/sandboxd`` package itself, so a route added later is covered without
editing this file; tests/sandbox/test_sandboxd.py checks the same with a fixed list.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from openagents.sandbox.local import SANDBOXD_MODULE
from openagents.sandbox.port import sandbox_token

from infra.constructs.sandbox import IMAGE_DIR, SANDBOX_PORT

DOCKERFILE = IMAGE_DIR / "Dockerfile"
KEY = b"k" * 32
SESSION = "sess_auth"
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
UNAUTHORIZED = {"error": "missing or invalid bearer token", "code": "unauthorized"}


def _routes() -> dict[tuple[str, str], Any]:
    """sandboxd's route table, from the image folder (its modules dropped again afterwards)."""
    sys.path.insert(0, str(IMAGE_DIR))
    try:
        routes: dict[tuple[str, str], Any] = importlib.import_module("sandboxd.routes").ROUTES
    finally:
        sys.path.remove(str(IMAGE_DIR))
        for name in [name for name in sys.modules if name.split(".")[0] == "sandboxd"]:
            del sys.modules[name]
    return routes


@dataclass
class Daemon:
    endpoint: str
    token: str

    def call(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        data = b"{}" if method in ("POST", "PUT", "PATCH") else None
        request = urllib.request.Request(  # noqa: S310 - a local http URL
            self.endpoint + path, data=data, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            with error:
                return int(error.code), bytes(error.read())


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """The real sandboxd, started with the image's arguments (port 0 and loopback instead of
    8080 on every interface) and the token the driver would give generation 1."""
    workspace = tmp_path_factory.mktemp("workspace")
    token = sandbox_token(KEY, SESSION, 1)
    argv = [sys.executable, *SANDBOXD_MODULE, "--host", "127.0.0.1", "--port", "0"]
    process = subprocess.Popen(
        [*argv, "--workspace", str(workspace)],
        env={
            "PATH": os.environ["PATH"],
            "SANDBOXD_TOKEN": token,
            "HOME": str(workspace),
            "PYTHONPATH": str(IMAGE_DIR),  # the image's /opt/sandboxd
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready: dict[str, Any] = json.loads(process.stdout.readline())
        assert ready["ready"] is True
        yield Daemon(f"http://127.0.0.1:{ready['port']}", token)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _paths() -> list[str]:
    """Every path sandboxd knows, one manifest path, and paths it does not know."""
    paths = sorted({path for _, path in _routes()})
    assert "/health" in paths
    return [*paths, "/snapshots/snap-1/manifest", "/no/such/endpoint", "/", "/health/"]


def test_the_image_serves_sandboxd_on_the_task_definitions_port() -> None:
    """The Dockerfile's entry point listens where the task definition maps the port, and has no
    HEALTHCHECK (it could not know the token)."""
    text = DOCKERFILE.read_text()
    entrypoint = re.search(r"^ENTRYPOINT (\[.*?\])\s*$", text, re.M | re.S)
    assert entrypoint is not None
    argv = json.loads(entrypoint.group(1).replace("\\\n", ""))
    assert argv[argv.index("--port") + 1] == str(SANDBOX_PORT)
    assert not re.search(r"^HEALTHCHECK", text, re.M)


def test_every_route_refuses_a_request_without_the_generations_token(daemon: Daemon) -> None:
    other_generation = sandbox_token(KEY, SESSION, 2)
    other_session = sandbox_token(KEY, "sess_other", 1)
    refused = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"Authorization": f"Basic {daemon.token}"},
        {"Authorization": f"Bearer {other_generation}"},
        {"Authorization": f"Bearer {other_session}"},
        {"Authorization": f"Bearer {daemon.token[:-1]}"},
        {"Authorization": f"Bearer {daemon.token}x"},
        {"X-Sandbox-Token": daemon.token},
    ]
    for path in _paths():
        for method in METHODS:
            for query in ("", "?path=a"):
                for headers in refused:
                    status, body = daemon.call(method, path + query, headers)
                    where = (method, path + query, headers)
                    assert status == 401, where
                    assert json.loads(body) == UNAUTHORIZED, where


def test_methods_sandboxd_does_not_serve_answer_nothing(daemon: Daemon) -> None:
    """HEAD and OPTIONS never reach a route: the HTTP server refuses them before dispatch."""
    for method in ("HEAD", "OPTIONS", "TRACE"):
        status, body = daemon.call(method, "/health")
        assert status in (401, 405, 501), method
        assert b"workspace" not in body


def test_the_generations_token_is_accepted(daemon: Daemon) -> None:
    """The check above is not vacuous: with the token, /health answers."""
    status, body = daemon.call("GET", "/health", {"Authorization": f"Bearer {daemon.token}"})
    assert status == 200
    assert json.loads(body)["ok"] is True
    # the scheme is case-insensitive, the token is not
    status, _ = daemon.call("GET", "/health", {"Authorization": f"bearer {daemon.token}"})
    assert status == 200
    status, _ = daemon.call("GET", "/health", {"Authorization": f"Bearer {daemon.token.upper()}"})
    assert status == 401
