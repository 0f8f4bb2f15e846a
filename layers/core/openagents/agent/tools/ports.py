"""A detached ``bash`` that starts a server: which new TCP port listens in the sandbox after
it, waited for on a condition (a new port; the process gone; stop requested), bounded by
``PORT_WAIT_SECONDS``. The model is told the port is previewable, never a link: a preview
link is the user's, asked for when they click "Open preview" in the chat's card."""

from __future__ import annotations

import time
from collections.abc import Callable

from openagents.agent.models.port import JsonValue
from openagents.agent.sandbox import PortReader, SandboxError, Workspace
from openagents.agent.tools.base import ToolContext

PORT_WAIT_SECONDS = 10.0
PORT_POLL_SECONDS = 0.25
ALIVE_EVERY = 4  # polls between checks that the process still runs


def listening(workspace: Workspace) -> set[int] | None:
    """The ports listening now; None when this workspace cannot tell (or the sandbox did not)."""
    if not isinstance(workspace, PortReader):
        return None
    try:
        return set(workspace.ports())
    except SandboxError:
        return None


def _alive(workspace: Workspace, pid: int) -> bool:
    try:
        said = workspace.exec(argv=["kill", "-0", str(pid)], timeout_seconds=10)
    except SandboxError:
        return False
    return said.exit_code == 0


def new_ports(
    context: ToolContext,
    before: set[int] | None,
    pid: int | None,
    *,
    within: float = PORT_WAIT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """The ports that listen now and did not ``before`` (sorted): as soon as one does, or
    nothing once ``within`` passed, the process ended or stop was requested."""
    if before is None:
        return []
    deadline = clock() + within
    polls = 0
    while True:
        now = listening(context.workspace)
        if now is None:
            return []
        fresh = sorted(now - before)
        if fresh or clock() >= deadline or context.cancelled():
            return fresh
        polls += 1
        if pid is not None and polls % ALIVE_EVERY == 0 and not _alive(context.workspace, pid):
            return sorted((listening(context.workspace) or set()) - before)
        sleep(PORT_POLL_SECONDS)


def previewable(ports: list[int]) -> dict[str, JsonValue]:
    """What the tool result adds: the ports, and what the model may say about them."""
    if not ports:
        return {}
    named = ", ".join(str(p) for p in ports)
    return {
        "ports": list[JsonValue](ports),
        "preview": (
            f"Listening on port {named}: previewable. The user opens it from the chat's preview "
            "card (Open preview) or the Preview tab, as a private link made when they click "
            "(http://<port>-<session>.<preview host>/); do not write a preview URL yourself."
        ),
    }
