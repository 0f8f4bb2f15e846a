"""Dev servers: detect how a project runs (``domain/dev_servers.py``), install its dependencies
when they are missing, launch it detached in the sandbox, wait (bounded) until its port
listens, and answer a private preview link to it. Its record, log and pid live in the
sandbox's ``/tmp/openagents`` (the sandbox's word, read back as such).

What a resume or an unarchive starts again is kept twice in the workspace's git: the file
``.git/openagents/<name>.json`` (a snapshot keeps it) and a commit on the hidden ref
``refs/openagents/services/<name>`` holding the same record (an archive's bundle holds every
ref and its restore fetches them all, so it survives an archive, which keeps no file of
``.git``). Never pushed: pushes name the session's own branch.

A request never waits longer than ``RESPOND_SECONDS`` (API Gateway cuts a request at 29 s): an
install runs detached, ahead of the server in the same launch, and a server not listening by
then is answered ``status: "starting"`` (202); GET reports ``running`` once its port listens,
``exited`` (with its log's tail) when its process ended first."""

from __future__ import annotations

import dataclasses
import json
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from openagents.domain.dev_servers import (
    KEPT_DIR,
    DevServerPlan,
    NoDevServer,
    custom_plan,
    kept_plan,
    launch_script,
    node_plan,
    python_plan,
)
from openagents.domain.errors import Conflict, InvalidInput, NotFound
from openagents.domain.identity import Identity
from openagents.domain.models import Session
from openagents.sandbox.port import ExecResult, Sandboxd, SandboxError
from openagents.services.previews import Previews, check_port

log = logging.getLogger(__name__)
STATE_DIR = "/tmp/openagents"  # noqa: S108 - the sandbox's own /tmp
START_SECONDS = 120
RESPOND_SECONDS = 20.0  # the most one request waits for the port (API Gateway: 29 s)
STOP_SECONDS = 10
POLL_SECONDS = 0.25
TAIL_CHARS = 2000
SERVICE_REFS = "refs/openagents/services"
RECORD_AUTHOR = {  # the record's commit, not the user's work: a fixed identity
    "GIT_AUTHOR_NAME": "openagents", "GIT_AUTHOR_EMAIL": "openagents@localhost",
    "GIT_COMMITTER_NAME": "openagents", "GIT_COMMITTER_EMAIL": "openagents@localhost",
}  # fmt: skip


class NoDevServerFound(InvalidInput):
    code = "no_dev_server_found"


class DevServerFailed(InvalidInput):
    code = "dev_server_failed"


class PortInUse(Conflict):
    code = "port_in_use"


@dataclass(frozen=True)
class DevServer:
    port: int
    command: str
    log_path: str
    running: bool
    framework: str | None = None
    url: str | None = None
    log_tail: str | None = None
    status: str = "running"  # "starting": launched, not listening yet; "exited"; "stopped"


def _tail(text: str) -> str:
    shown = text[-TAIL_CHARS:]
    return "".join(c for c in shown if c.isprintable() or c in "\n\t")


class DevServers:
    def __init__(
        self,
        previews: Previews,
        sleep: Callable[[float], None] = time.sleep,
        name: str = "dev-server",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._previews = previews
        self._sleep = sleep
        self._clock = clock
        self._name = name  # its files: /tmp/openagents/<name>.{json,log,pid}
        self.log_path = f"{STATE_DIR}/{name}.log"

    def _exec(self, client: Sandboxd, command: str, **options: Any) -> ExecResult:
        try:
            return client.exec(command, **options)
        except SandboxError as exc:
            if exc.status == 404:
                raise NotFound("No such folder in the workspace", field="path") from exc
            raise

    def _plan(
        self, client: Sandboxd, path: str, command: str | None, port: int | None
    ) -> DevServerPlan:
        if command is not None:
            return custom_plan(command, port)
        try:
            entries = client.list_files(path, depth=1).entries
        except SandboxError as exc:
            raise NotFound("No such folder in the workspace", field="path") from exc
        names = {PurePosixPath(e.path).name for e in entries[:10_000]}
        if "package.json" in names:
            manifest = client.read_file(f"{path}/package.json", max_bytes=1 << 20)
            return node_plan(manifest.content, names, port, "node_modules" in names)
        wanted = ""
        for name in ("requirements.txt", "pyproject.toml"):
            if name in names:
                wanted += client.read_file(f"{path}/{name}", max_bytes=65536).content
        return python_plan(names, wanted, port)

    def start(
        self,
        identity: Identity,
        session_id: str,
        path: str | None,
        command: str | None,
        port: int | None,
    ) -> DevServer:
        """Detect (or take ``command``), install, launch detached, wait until it listens."""
        return self._guarded(
            identity, session_id, lambda: self._start(identity, session_id, path, command, port)
        )

    def _guarded(
        self, identity: Identity, session_id: str, call: Callable[[], DevServer]
    ) -> DevServer:
        try:
            return call()
        except SandboxError as exc:
            session, _ = self._previews.running(identity.user_id, session_id)
            raise self._previews.unavailable(session, exc) from exc

    def _start(
        self,
        identity: Identity,
        session_id: str,
        path: str | None,
        command: str | None,
        port: int | None,
    ) -> DevServer:
        if port is not None:
            check_port(port)
        cwd = (path or ".").strip() or "."
        session, client = self._previews.running(identity.user_id, session_id)
        try:
            plan = self._plan(client, cwd, command, port)
        except NoDevServer as exc:
            raise NoDevServerFound(str(exc), field="command") from exc
        if plan.port in {p.port for p in client.ports()}:
            raise PortInUse(f"Port {plan.port} is already taken in the sandbox", field="port")
        # the install runs detached, ahead of the server (one launch, one log); the record a
        # resume starts again names the server alone
        launched = (
            dataclasses.replace(plan, command=f"{plan.install} && {plan.command}")
            if plan.install
            else plan
        )
        self._exec(
            client,
            launch_script(launched, cwd, STATE_DIR, self._name),
            cwd=".",
            timeout_seconds=30,
        )
        if plan.install:
            self._exec(client, self._keep_record(plan, cwd), cwd=".", timeout_seconds=10)
        self._exec(client, self._keep_ref(plan, cwd), cwd=".", timeout_seconds=10)
        if not self._wait_listening(client, launched, RESPOND_SECONDS):
            return DevServer(
                plan.port, launched.command, self.log_path, False, plan.framework,
                status="starting",
            )  # fmt: skip
        link = self._previews.create(identity, session.id, plan.port, "/")
        return DevServer(plan.port, launched.command, self.log_path, True, plan.framework, link.url)

    def _keep_record(self, plan: DevServerPlan, cwd: str) -> str:
        record = shlex.quote(json.dumps({"command": plan.command, "port": plan.port, "cwd": cwd}))
        return f"[ ! -d {KEPT_DIR} ] || printf '%s' {record} > {KEPT_DIR}/{self._name}.json"

    def _keep_ref(self, plan: DevServerPlan, cwd: str) -> str:
        """The record as a commit on ``refs/openagents/services/<name>`` (no repository: none)."""
        record = shlex.quote(json.dumps({"command": plan.command, "port": plan.port, "cwd": cwd}))
        who = " ".join(f"{k}={v}" for k, v in RECORD_AUTHOR.items())
        entry = shlex.quote(f"100644 blob %s\t{self._name}.json\n")
        return (
            f"[ ! -d .git ] || {{ b=$(printf '%s' {record} | git hash-object -w --stdin) && "
            f't=$(printf {entry} "$b" | git mktree) && '
            f"c=$({who} git commit-tree \"$t\" -m 'openagents: {self._name}' < /dev/null) && "
            f'git update-ref {SERVICE_REFS}/{self._name} "$c"; }}'
        )

    def _alive(self, client: Sandboxd) -> bool:
        alive = f"kill -0 -- -$(cat {STATE_DIR}/{self._name}.pid) 2>/dev/null"
        return self._exec(client, alive).exit_code == 0

    def _wait_listening(self, client: Sandboxd, plan: DevServerPlan, within: float) -> bool:
        """True once the port listens; False when ``within`` passed first with the server
        still alive; DevServerFailed (with its log's tail) when it exited."""
        deadline = self._clock() + within
        checks = 0
        while True:
            if plan.port in {p.port for p in client.ports()}:
                return True
            checks += 1
            if self._clock() >= deadline:
                if self._alive(client):
                    return False
                break
            if checks % 8 == 0 and not self._alive(client):
                break
            self._sleep(POLL_SECONDS)
        log = self._exec(client, f"tail -c {TAIL_CHARS} {self.log_path}").stdout
        raise DevServerFailed(
            f"`{plan.command}` did not listen on port {plan.port}:\n{_tail(log)}", field="port"
        )

    def status(self, identity: Identity, session_id: str) -> DevServer:
        """What was started, and whether its port listens now (404 when nothing was)."""
        return self._guarded(identity, session_id, lambda: self._status(identity, session_id))

    def _status(self, identity: Identity, session_id: str) -> DevServer:
        _, client = self._previews.running(identity.user_id, session_id)
        said = self._exec(client, f"head -c 8192 {STATE_DIR}/{self._name}.json").stdout
        try:
            record = json.loads(said)
            port, command = int(record["port"]), str(record["command"])[:4096]
            check_port(port)
        except (ValueError, KeyError, TypeError, InvalidInput):
            raise NotFound("No dev server was started in this sandbox") from None
        running = port in {p.port for p in client.ports()}
        status = "running" if running else "starting" if self._alive(client) else "exited"
        log = self._exec(client, f"tail -c {TAIL_CHARS} {self.log_path} 2>/dev/null").stdout
        return DevServer(port, command, self.log_path, running, log_tail=_tail(log), status=status)

    def stop(self, identity: Identity, session_id: str) -> DevServer:
        """Stop its process group (TERM, then KILL after a bound); 404 when nothing was started."""
        return self._guarded(identity, session_id, lambda: self._stop(identity, session_id))

    def _stop(self, identity: Identity, session_id: str) -> DevServer:
        current = self._status(identity, session_id)
        _, client = self._previews.running(identity.user_id, session_id)
        group = f"-$(cat {STATE_DIR}/{self._name}.pid)"
        self._exec(client, f"kill -TERM -- {group} 2>/dev/null; true")
        deadline = time.monotonic() + STOP_SECONDS
        while current.port in {p.port for p in client.ports()}:
            if time.monotonic() > deadline:
                self._exec(client, f"kill -KILL -- {group} 2>/dev/null; true")
                break
            self._sleep(POLL_SECONDS)
        self._exec(client, f"rm -f {STATE_DIR}/{self._name}.json {KEPT_DIR}/{self._name}.json")
        self._exec(client, f"git update-ref -d {SERVICE_REFS}/{self._name} 2>/dev/null; true")
        return DevServer(current.port, current.command, self.log_path, False, status="stopped")

    def restart(self, session: Session) -> None:
        """A resumed or unarchived sandbox starts again what its workspace's kept record names
        (the file, else the ref: an unarchived workspace has the ref alone; no install, no wait:
        the sandbox's own record, run in the sandbox). Never fails the caller."""
        handle = session.sandbox
        if handle is None or handle.endpoint is None:
            return
        try:
            client = self._previews.client(handle)
            name = self._name
            read = (
                f"cat {KEPT_DIR}/{name}.json 2>/dev/null || "
                f"git show {SERVICE_REFS}/{name}:{name}.json 2>/dev/null | head -c 16384"
            )
            said = client.exec(read, timeout_seconds=10)
            kept = kept_plan(said.stdout) if said.exit_code == 0 else None
            if kept is None:
                return
            plan, cwd = kept
            if plan.port in {p.port for p in client.ports()}:
                return
            client.exec(launch_script(plan, cwd, STATE_DIR, self._name), timeout_seconds=30)
            log.info("restarted %s of %s on port %d", self._name, session.id, plan.port)
        except Exception as exc:  # a resume never fails for a dev server
            log.warning("could not restart %s of %s: %s", self._name, session.id, exc)
