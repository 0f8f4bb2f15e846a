"""The editor: code-server in the sandbox on its own port, opened through a private preview link.
It runs without a password of its own (``--auth none``) because nothing reaches it but the
preview proxy, which lets the session's owner alone through (``functions/api/preview.py``)."""

from __future__ import annotations

from openagents.domain.errors import InvalidInput
from openagents.domain.identity import Identity
from openagents.domain.models import Session
from openagents.sandbox.port import SandboxError
from openagents.services.dev_servers import DevServer, DevServers
from openagents.services.previews import Previews

EDITOR_PORT = 13337
COMMAND = (
    f"code-server --auth none --bind-addr 127.0.0.1:{EDITOR_PORT} --disable-telemetry "
    "--disable-update-check --disable-workspace-trust ."
)
HOW_TO_GET_IT = (
    "code-server is not installed in the sandbox. On one machine, install it on the host "
    "(`npm install -g code-server`, or see https://coder.com/docs/code-server/install): the "
    "sandbox sees the host's /usr. The Fargate sandbox image ships it."
)


class CodeServerMissing(InvalidInput):
    code = "code_server_missing"


class CodeEditor:
    def __init__(self, previews: Previews, servers: DevServers | None = None) -> None:
        self._previews = previews
        self._servers = servers or DevServers(previews, name="editor")

    def start(self, identity: Identity, session_id: str) -> DevServer:
        """code-server on ``EDITOR_PORT`` (already running: a fresh link to it)."""
        session, client = self._previews.running(identity.user_id, session_id)
        try:
            listening = {p.port for p in client.ports()}
            found = client.exec("command -v code-server", timeout_seconds=10)
        except SandboxError as exc:
            raise self._previews.unavailable(session, exc) from exc
        if EDITOR_PORT in listening:
            link = self._previews.create(identity, session.id, EDITOR_PORT, "/")
            return DevServer(
                EDITOR_PORT, COMMAND, self._servers.log_path, True, "code-server", link.url
            )
        if found.exit_code != 0:
            raise CodeServerMissing(HOW_TO_GET_IT)
        return self._servers.start(identity, session_id, None, COMMAND, EDITOR_PORT)

    def restart(self, session: Session) -> None:
        self._servers.restart(session)

    def status(self, identity: Identity, session_id: str) -> DevServer:
        return self._servers.status(identity, session_id)

    def stop(self, identity: Identity, session_id: str) -> DevServer:
        return self._servers.stop(identity, session_id)
