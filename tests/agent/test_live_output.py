"""A running bash command's output so far (issue 25): the throttle on a clock the test drives,
the bash tool over a streaming workspace, and what a re-run step writes of its preliminary
outputs (never a repeat)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from openagents.agent.models.port import JsonValue
from openagents.agent.replay import ReplayWriter
from openagents.agent.sandbox import ExecOutput, ExecResult, FileText
from openagents.agent.tools.base import ToolContext
from openagents.agent.tools.shell import BashTool, LiveOutput
from openagents.domain.checkpoints import Checkpoint
from openagents.store.runs import Chunk, RunStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def out(data: str, stream: str = "stdout") -> ExecOutput:
    return ExecOutput(stream, data.encode())  # type: ignore[arg-type]


def test_output_is_shown_at_once_then_at_most_every_quarter_second() -> None:
    clock, shown = Clock(), list[JsonValue]()
    live = LiveOutput(shown.append, clock=clock)
    live.add(out("a\n"))
    assert shown == [{"status": "running", "stdout": "a\n", "stderr": "", "outputBytes": 2}]
    clock.now += 0.1
    live.add(out("b\n"))
    live.add(out("oops\n", "stderr"))
    live.tick()
    assert len(shown) == 1  # too soon
    clock.now += 0.15
    live.tick()
    assert shown[-1] == {
        "status": "running",
        "stdout": "a\nb\n",
        "stderr": "oops\n",
        "outputBytes": 9,
    }
    clock.now += 1
    live.tick()
    assert len(shown) == 2  # nothing new: nothing shown


def test_only_the_tail_is_shown_and_the_budget_ends_the_showing() -> None:
    clock, shown = Clock(), list[JsonValue]()
    live = LiveOutput(shown.append, clock=clock, tail=8, budget=300)
    live.add(out("0123456789abcdef"))
    assert cast(dict[str, Any], shown[-1])["stdout"] == "…89abcdef"
    for _ in range(20):
        clock.now += 1
        live.add(out("x" * 100))
    assert live.spent <= 300
    assert 1 < len(shown) < 5  # each shown output is about 90 bytes of JSON


class StreamingFake:
    """A streaming workspace whose command writes three lines, then answers."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.asked: list[dict[str, Any]] = []

    def exec(self, **asked: Any) -> ExecResult:
        raise AssertionError("the turn's bash streams")

    def exec_stream(self, **asked: Any) -> Iterator[ExecOutput | ExecResult]:
        self.asked.append(asked)
        for line in ("one\n", "two\n", "three\n"):
            yield out(line)
        yield ExecResult(0, "one\ntwo\nthree\n", "")

    def read_text(self, path: str, max_bytes: int = 10 << 20) -> FileText:
        raise AssertionError

    def write_text(self, path: str, content: str) -> None:
        raise AssertionError

    def checkpoint(self, ref: str) -> Checkpoint:
        raise AssertionError


class PlainFake(StreamingFake):
    exec_stream = None  # type: ignore[assignment]  # cannot stream

    def exec(self, **asked: Any) -> ExecResult:
        return ExecResult(0, "one\n", "")


class Ticking(Clock):
    """A second passes each time it is read: every piece comes well after the last showing."""

    def __call__(self) -> float:
        self.now += 1
        return self.now


def test_bash_shows_its_output_while_it_runs_and_answers_the_final_output() -> None:
    clock = Ticking()
    workspace, shown = StreamingFake(clock), list[JsonValue]()
    context = ToolContext(workspace=workspace, call_id="c1", progress=shown.append)
    output = BashTool(clock).run({"command": "printf lines"}, context)
    assert output == {"exitCode": 0, "stdout": "one\ntwo\nthree\n", "stderr": ""}
    assert [cast(dict[str, Any], s)["stdout"] for s in shown] == [
        "one\n",
        "one\ntwo\n",
        "one\ntwo\nthree\n",
    ]
    assert workspace.asked[0]["key"] == "bash:c1"  # still run once per call


def test_bash_without_a_progress_or_a_streaming_workspace_runs_as_before() -> None:
    shown = list[JsonValue]()
    plain = ToolContext(workspace=PlainFake(Clock()), call_id="c1", progress=shown.append)
    assert BashTool().run({"command": "echo one"}, plain) == {
        "exitCode": 0,
        "stdout": "one\n",
        "stderr": "",
    }
    assert shown == []


# ------------------------------------------------------------------ a re-run step


class Log:
    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def append(self, run_id: str, chunks: Sequence[Chunk], *_: Any) -> int:
        self.chunks += chunks
        return len(self.chunks)


def prelim(stdout: str) -> Chunk:
    return {
        "type": "tool-output-available",
        "toolCallId": "c1",
        "output": {"status": "running", "stdout": stdout},
        "preliminary": True,
    }


FINAL: Chunk = {"type": "tool-output-available", "toolCallId": "c1", "output": {"exitCode": 0}}


def rerun(logged: list[Chunk], again: list[Chunk]) -> list[Chunk]:
    log = Log()
    writer = ReplayWriter(cast(RunStore, log), "run", logged)
    for chunk in again:
        writer.add(chunk)
    writer.flush()
    return log.chunks


def test_a_collected_command_writes_its_final_output_once_after_the_attempts_preview() -> None:
    assert rerun([prelim("a"), prelim("ab")], [FINAL]) == [FINAL]
    assert rerun([prelim("a"), prelim("ab"), FINAL], [FINAL]) == []


def test_a_rerun_preview_stands_in_for_the_attempts_and_goes_on_after_it() -> None:
    finish: Chunk = {"type": "finish-step"}
    written = rerun([prelim("a"), prelim("ab")], [prelim("x"), prelim("xy"), prelim("xyz"), FINAL])
    assert written == [prelim("xyz"), FINAL]
    assert rerun([prelim("a")], [prelim("a"), FINAL, finish]) == [FINAL, finish]
