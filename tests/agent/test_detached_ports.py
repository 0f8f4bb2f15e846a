"""A detached ``bash``'s new port (``agent/tools/ports.py``): waited for on a condition — a
port that did not listen before, the process gone, stop requested — bounded on a controllable
clock; a workspace that cannot list ports (or fails to) adds nothing to the result."""

from __future__ import annotations

from openagents.agent.sandbox import ExecResult, SandboxError
from openagents.agent.tools.base import ToolContext
from openagents.agent.tools.ports import (
    PORT_POLL_SECONDS,
    PORT_WAIT_SECONDS,
    new_ports,
    previewable,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Ports:
    """A workspace whose listening ports change over (fake) time; ``alive`` until ``dies``."""

    def __init__(self, clock: Clock, timeline: list[tuple[float, set[int]]], dies: float = 1e9):
        self.clock, self.timeline, self.dies = clock, timeline, dies
        self.reads = 0

    def ports(self) -> list[int]:
        self.reads += 1
        found: set[int] = set()
        for at, ports in self.timeline:
            if self.clock.now >= at:
                found = ports
        return sorted(found)

    def exec(self, *, argv: list[str] | None = None, **_: object) -> ExecResult:
        assert argv is not None
        assert argv[:2] == ["kill", "-0"]
        return ExecResult(0 if self.clock.now < self.dies else 1, "", "")

    def read_text(self, path: str, max_bytes: int = 0) -> object: ...
    def write_text(self, path: str, content: str) -> None: ...
    def checkpoint(self, ref: str) -> object: ...


def context(workspace: object, cancelled: bool = False) -> ToolContext:
    return ToolContext(workspace=workspace, cancelled=lambda: cancelled)  # type: ignore[arg-type]


def test_the_new_port_is_answered_as_soon_as_it_listens() -> None:
    clock = Clock()
    workspace = Ports(clock, [(0, {5432}), (1.0, {5432, 8123})])
    found = new_ports(context(workspace), {5432}, 42, clock=clock, sleep=clock.sleep)
    assert found == [8123]
    assert clock.now < 1.0 + 2 * PORT_POLL_SECONDS  # not the whole bound


def test_no_new_port_is_waited_for_at_most_the_bound_or_until_the_process_ends() -> None:
    clock = Clock()
    quiet = Ports(clock, [(0, {5432})])
    assert new_ports(context(quiet), {5432}, 42, clock=clock, sleep=clock.sleep) == []
    assert PORT_WAIT_SECONDS <= clock.now < PORT_WAIT_SECONDS + 1
    clock = Clock()
    ended = Ports(clock, [(0, set())], dies=0.5)
    assert new_ports(context(ended), set(), 42, clock=clock, sleep=clock.sleep) == []
    assert clock.now < 2  # its process ended: no use waiting
    clock = Clock()
    stopped = Ports(clock, [(0, set())])
    assert new_ports(context(stopped, cancelled=True), set(), 42, clock=clock) == []
    assert clock.now == 0


def test_a_workspace_that_cannot_tell_adds_nothing() -> None:
    class Failing(Ports):
        def ports(self) -> list[int]:
            raise SandboxError("sandboxd said no")

    clock = Clock()
    assert new_ports(context(Failing(clock, [])), set(), 1, clock=clock, sleep=clock.sleep) == []
    assert new_ports(context(object()), None, 1) == []
    assert previewable([]) == {}
    said = previewable([8123])
    assert said["ports"] == [8123]
    assert "port 8123" in str(said["preview"])
    assert "token" not in str(said["preview"])
