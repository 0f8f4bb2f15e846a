"""Test clients: the same API calls through the Lambda handler (API Gateway v2 events, AWS
mode) or over HTTP against a real local server (uvicorn, HS256 tokens)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import uvicorn
from mangum import Mangum
from openagents.auth.tokens import local_tokens
from openagents.composition import Container
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.local.dynamodb import free_port
from openagents.settings import Mode, Settings

from functions.api.app import create_app

USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) openagents-tests"
# Tests make their local repositories under the system temp folder (pytest's tmp_path): allow
# it as a local repository root (the default root is the home folder).
os.environ.setdefault("OPENAGENTS_LOCAL_REPO_ROOTS", tempfile.gettempdir())


def parse_body(text: str) -> Any:
    """JSON bodies parsed; any other (the Markdown transcript) kept as text."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class NoMetrics:
    """A metrics sink that drops everything (tests that do not look at metrics)."""

    def count(self, name: str, value: int = 1) -> None:
        pass


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), self.body
        assert "error" in self.body, self.body
        return self.body


@dataclass
class LambdaContext:
    function_name: str = "openagents-api"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:openagents-api"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def apigw_event(
    method: str,
    path: str,
    *,
    claims: dict[str, Any] | None,
    body: bytes | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, as the JWT authorizer sends it."""
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "api",
        "domainName": "api.example.com",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.9",
            "userAgent": USER_AGENT,
        },
        "requestId": str(uuid.uuid4()),
        "routeKey": "$default",
        "stage": "$default",
        "time": "29/Nov/2026:10:00:00 +0000",
        "timeEpoch": int(time.time() * 1000),
    }
    if claims is not None:
        request_context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    all_headers = {"user-agent": USER_AGENT, "host": "api.example.com", **(headers or {})}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": all_headers,
        "requestContext": request_context,
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if body is not None:
        event["body"] = base64.b64encode(body).decode()
        event["isBase64Encoded"] = True
    return event


class Api:
    """What every API test talks to; ``user`` picks the caller (None: anonymous)."""

    transport = ""

    def request(
        self,
        method: str,
        path: str,
        *,
        user: str | None = "alice",
        name: str | None = None,
        json_body: Any = None,
        raw_body: bytes | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        raise NotImplementedError

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("POST", path, json_body=body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("PATCH", path, json_body=body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("PUT", path, json_body=body, **kw)

    def delete(self, path: str, **kw: Any) -> Reply:
        return self.request("DELETE", path, **kw)


def _encode(json_body: Any, raw_body: bytes | None) -> bytes | None:
    if raw_body is not None:
        return raw_body
    return None if json_body is None else json.dumps(json_body).encode()


class LambdaApi(Api):
    """AWS mode: identity comes from the authorizer's claims in the event."""

    transport = "lambda"

    def __init__(self, settings: Settings) -> None:
        aws = settings.model_copy(update={"mode": Mode.AWS})
        self.settings = aws
        self._handler = Mangum(create_app(lambda: aws), lifespan="off")

    def request(
        self,
        method: str,
        path: str,
        *,
        user: str | None = "alice",
        name: str | None = None,
        json_body: Any = None,
        raw_body: bytes | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        claims = (
            None
            if user is None
            else {"sub": user, "username": user, **({"name": name} if name else {})}
        )
        body = _encode(json_body, raw_body)
        hdrs = (
            {"content-type": "application/json", **(headers or {})}
            if body is not None
            else dict(headers or {})
        )
        event = apigw_event(method, path, claims=claims, body=body, query=query, headers=hdrs)
        response = self._handler(event, LambdaContext())  # type: ignore[arg-type]
        text = response.get("body") or ""
        if response.get("isBase64Encoded"):
            text = base64.b64decode(text).decode()
        lowered = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
        return Reply(response["statusCode"], lowered, parse_body(text))


class HttpApi(Api):
    """One machine: a real uvicorn server on 127.0.0.1 and minted HS256 tokens."""

    transport = "http"

    def __init__(self, settings: Settings, base_url: str) -> None:
        self.settings = settings
        self.base_url = base_url
        self.tokens = local_tokens(settings)
        self.client = httpx.Client(
            base_url=base_url, timeout=30, headers={"user-agent": USER_AGENT}
        )

    def token(self, user: str, name: str | None = None) -> str:
        return self.tokens.mint(user, name=name, ttl_seconds=600)

    def request(
        self,
        method: str,
        path: str,
        *,
        user: str | None = "alice",
        name: str | None = None,
        json_body: Any = None,
        raw_body: bytes | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        hdrs = dict(headers or {})
        if user is not None:
            hdrs.setdefault("authorization", f"Bearer {self.token(user, name)}")
        body = _encode(json_body, raw_body)
        if body is not None:
            hdrs.setdefault("content-type", "application/json")
        response = self.client.request(method, path, content=body, params=query, headers=hdrs)
        return Reply(response.status_code, dict(response.headers), parse_body(response.text))


@contextmanager
def serve_app(settings: Settings) -> Iterator[tuple[str, Any]]:
    """Serve the API app on a free 127.0.0.1 port in a thread, as ``openagents dev`` does:
    (its base URL, the app)."""
    port = free_port()
    app = create_app(lambda: settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("local server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def local_server(settings: Settings) -> Iterator[str]:
    with serve_app(settings) as (base_url, _):
        yield base_url


def export_settings(settings: Settings, monkeypatch: Any) -> None:
    """Put ``settings`` in the environment: Lambda task handlers (run in process by moto's
    Step Functions) read their settings from it, as they do on AWS."""
    for name, value in settings.model_dump(mode="json").items():
        variable = f"OPENAGENTS_{name.upper()}"
        if value is None:  # unset, as on AWS (exported, None would read back as "null")
            monkeypatch.delenv(variable, raising=False)
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        monkeypatch.setenv(variable, text)


def git(cwd: Any, *args: str) -> str:
    import subprocess

    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_origin(root: Any) -> Any:
    """A bare repository with ``main`` (2 commits) and ``feature`` (1 more), like a remote."""
    from pathlib import Path

    root = Path(root)
    origin = root / "origin.git"
    work = root / "seed"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    git(root, "init", "-q", "-b", "main", str(work))
    git(work, "config", "user.email", "seed@example.com")
    git(work, "config", "user.name", "Seed")
    (work / "README.md").write_text("# demo\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "initial")
    (work / "app.py").write_text("print('hello')\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "app")
    git(work, "checkout", "-qb", "feature")
    (work / "feature.txt").write_text("feature\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "feature")
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main", "feature")
    return origin


@contextmanager
def provisioning_runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: Any
) -> Iterator[Settings]:
    """Settings with provisioning on: the real ASL in moto's Step Functions, the provisioner
    task in process, sandboxes from the local driver. Waits for every execution on exit and
    stops the sandboxes the tasks started."""
    from openagents.local.stepfunctions import LocalStepFunctions

    from functions.provisioner import handler as provisioner

    machines = LocalStepFunctions(
        moto_endpoint, settings.region, settings.statemachines_dir
    ).install()
    live = settings.model_copy(
        update={
            "provision_on_create": True,
            "state_machines": machines,
            "stepfunctions_endpoint": moto_endpoint,
            "sandbox_ready_attempts": 20,
        }
    )
    export_settings(live, monkeypatch)
    try:
        yield live
    finally:
        _stop_executions(moto_endpoint, live.region, list(machines.values()))
        provisioner.runtime.get(live).driver.close()


def _stop_executions(endpoint: str, region: str, machines: list[str]) -> None:
    """No execution may outlive the test: its tasks would run with another test's settings."""
    import boto3

    sfn = boto3.client("stepfunctions", endpoint_url=endpoint, region_name=region)
    deadline = time.monotonic() + 60
    while True:
        running = [
            run["executionArn"]
            for machine in machines
            for run in sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")[
                "executions"
            ]
        ]
        if not running:
            return
        for arn in running:
            sfn.stop_execution(executionArn=arn, cause="test finished")
        if time.monotonic() > deadline:
            raise RuntimeError(f"executions still running: {running}")
        time.sleep(0.2)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def sandboxd_pid(handle: dict[str, Any]) -> int:
    """The sandboxd process itself: the handle's ref is prlimit/bubblewrap around it."""
    pending = [int(handle["ref"])]
    seen: list[int] = []
    while pending:
        pid = pending.pop()
        seen.append(pid)
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"python" in command[0] and any(b"sandboxd" in part for part in command[1:]):
            return pid
        pending += _children_of(pid)
    raise AssertionError(f"no sandboxd below {handle['ref']} (looked at {seen})")


def sandbox_workspace(ref: str | int) -> Path:
    """A live sandbox's /workspace as the host (root) sees it: through its sandboxd's root. The
    workspace volume is mounted only in the sandbox's own mount namespace."""
    return Path(f"/proc/{sandboxd_pid({'ref': ref})}/root/workspace")


def sqlite_runs(folder: Path) -> tuple[Any, str, str]:
    """A run store on a fresh SQLite store holding one session: (runs, session id, chat id)."""
    from openagents.artifacts.folder import FolderArtifactStore
    from openagents.store.runs_sqlite import SqliteRunStore
    from openagents.store.sqlite import SqliteStore

    from tests.contract.helpers import create

    store = SqliteStore(folder / "openagents.db", FolderArtifactStore(folder / "artifacts"), 4096)
    session = create(store)
    return SqliteRunStore(store), session.id, next(iter(session.chats))


def wait_active(container: Container, identity: Identity, session_id: str) -> Session:
    """Wait until the session's sandbox is active (a provisioning failure fails the test with
    its error)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        current = container.sessions.get(identity, session_id)
        if current.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.FAILED):
            assert current.lifecycle_state is LifecycleState.ACTIVE, current.lifecycle_error
            return current
        time.sleep(0.1)
    raise AssertionError("never active")


# ------------------------------------------------------------------ fresh interpreters


def lambda_context_fields() -> dict[str, Any]:
    """``LambdaContext``'s fields, for a fresh interpreter to build the same context from."""
    import dataclasses

    context = LambdaContext()
    fields = dataclasses.asdict(context)
    fields["remaining_time_in_millis"] = context.get_remaining_time_in_millis()
    return fields


@contextmanager
def interpreters(
    cases: dict[str, tuple[list[str], dict[str, str]]], cwd: Path
) -> Iterator[dict[str, subprocess.Popen[str]]]:
    """``python -c <args>`` per case in its environment, all started at once (each is mostly
    imports); killed when the block ends. ``answer`` reads one."""
    started: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, (args, env) in cases.items():
            started[name] = subprocess.Popen(
                [sys.executable, "-c", *args], cwd=cwd, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
        yield started
    finally:
        for process in started.values():
            process.kill()
            process.wait()


def answer(started: dict[str, subprocess.Popen[str]], name: str) -> Any:
    """What a case's interpreter printed last, as JSON (its stderr when it failed)."""
    process = started[name]
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])
