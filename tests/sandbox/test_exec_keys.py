"""``POST /exec`` with a ``key`` runs its command once per key: a repeat answers the first run's
result (waiting for it while it runs), and a command that died with its sandboxd is answered
``interrupted`` by the next one on the same workspace, never run again."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from openagents.sandbox.client import SandboxClient
from openagents.sandbox.port import ExecResult, SandboxError

from tests.sandbox.conftest import RunningSandbox, StartSandbox

GATED = "echo started > started; read line < gate; echo ran >> count; echo done"


def _wait_for(path: Path, text: str | None = None) -> None:
    """Until ``path`` exists (and, given ``text``, holds it)."""
    deadline = time.monotonic() + 30
    while not path.exists() or (text is not None and path.read_text() != text):
        assert time.monotonic() < deadline, f"{path.name} never appeared (or never held {text!r})"
        time.sleep(0.01)


def _gated(sandbox: RunningSandbox) -> None:
    """A git workspace (records on disk) and the fifo the gated command waits on."""
    result = sandbox.client.exec("git init -q . && mkfifo gate")
    assert result.exit_code == 0, result


def _in_thread(client: SandboxClient, key: str) -> tuple[threading.Thread, list[ExecResult | str]]:
    answers: list[ExecResult | str] = []

    def run() -> None:
        try:
            answers.append(client.exec(GATED, key=key))
        except SandboxError as error:  # its sandboxd was killed
            answers.append(str(error))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, answers


def test_a_repeated_key_answers_the_first_result(client: SandboxClient) -> None:
    first = client.exec("echo once >> count; wc -l < count", key="call-1")
    again = client.exec("echo once >> count; wc -l < count", key="call-1")
    assert first.stdout.strip() == "1"
    assert again == first
    assert client.exec("wc -l < count").stdout.strip() == "1"


def test_a_repeat_while_it_runs_waits_for_it(sandbox: RunningSandbox) -> None:
    _gated(sandbox)
    first, first_answer = _in_thread(sandbox.client, "call-2")
    _wait_for(sandbox.workspace / "started")
    second, second_answer = _in_thread(sandbox.client, "call-2")
    (sandbox.workspace / "gate").write_text("go\n")
    first.join(30)
    second.join(30)
    assert isinstance(first_answer[0], ExecResult), first_answer
    assert first_answer[0].stdout == "done\n"
    assert second_answer == first_answer
    assert (sandbox.workspace / "count").read_text() == "ran\n"


def test_a_command_that_died_with_its_sandboxd_is_interrupted(
    start_sandbox: StartSandbox,
) -> None:
    sandbox = start_sandbox("main")
    _gated(sandbox)
    first, _ = _in_thread(sandbox.client, "call-3")
    _wait_for(sandbox.workspace / "started")
    os.kill(sandbox.process.pid, signal.SIGKILL)  # the command's session outlives it: let it go
    (sandbox.workspace / "gate").write_text("go\n")
    first.join(30)
    # the command, left running, appends once the gate opens (the file exists a moment before
    # its line is written: wait for the line)
    _wait_for(sandbox.workspace / "count", "ran\n")
    count = (sandbox.workspace / "count").read_text()
    sandbox.stop()

    again = start_sandbox("main").client.exec(GATED, key="call-3")
    assert again.interrupted is True
    assert again.exit_code is None
    assert (sandbox.workspace / "count").read_text() == count  # not run a second time
