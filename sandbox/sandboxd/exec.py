"""``POST /exec``: one command (bash or an argv) in its own process group, with a time limit and
capped output; with a ``key``, run once per key (``exec_keys.py``); with ``"stream": true``
the output is sent as it comes, in frames (``exec_stream.py``).

Each command runs under its own keeper (``reaper.py``, a child subreaper in a session of its
own): at the timeout sandboxd tells the keeper to stop, and the keeper kills every descendant of
the command, those that left its process group (``setsid``, a double fork, ``nohup``) included.
A command that ends within its time leaves what it started in the background running (a dev
server launched detached on purpose)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from .errors import JsonObject, bad_request, not_found
from .exec_keys import exec_key
from .fields import bounded_int, bounded_number
from .process import base_env, kill_group, spawn
from .workspace import Workspace

if TYPE_CHECKING:
    from .app import App


MAX_EXEC_TIMEOUT_SECONDS = 600.0
DEFAULT_EXEC_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
MAX_OUTPUT_BYTES_LIMIT = 16 << 20
OUTPUT_GRACE_SECONDS = 2.0
REAPER = Path(__file__).resolve().with_name("reaper.py")
# The keeper kills in rounds for up to 20 s (a fork bomb at the pids limit); then it is killed.
REAPER_STOP_SECONDS = 30.0


Output = Callable[[str, bytes], None]  # (stdout | stderr, bytes kept) as they come


class OutputCollector(threading.Thread):
    """Drains one pipe, keeping the first ``cap`` bytes and noting whether more came; each
    piece kept is also told to ``output`` (a streamed exec's), at once, by this thread."""

    def __init__(
        self, stream: IO[bytes], cap: int, name: str = "", output: Output | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.cap = cap
        self.kept = bytearray()
        self.truncated = False
        self.output, self.stream_name = output, name

    def run(self) -> None:
        try:
            while data := os.read(self.stream.fileno(), 65536):
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += data[:room]
                    if self.output is not None:
                        self.output(self.stream_name, data[:room])
                if len(data) > room:
                    self.truncated = True
        finally:
            self.stream.close()

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")


@dataclass(frozen=True)
class ExecSpec:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float
    max_output: int


def answer_exec(app: App, body: JsonObject) -> JsonObject:
    spec = parse_exec(app.workspace, body)
    key = exec_key(body.get("key"))
    if key is None:
        return run_exec(spec)
    return app.exec_keys.run(app.workspace, key, lambda: run_exec(spec))


def parse_exec(workspace: Workspace, body: JsonObject) -> ExecSpec:
    return ExecSpec(
        argv=exec_argv(body.get("command"), body.get("argv")),
        cwd=exec_cwd(workspace, body.get("cwd")),
        env={**base_env(workspace), **exec_env(body.get("env"))},
        timeout=bounded_number(
            body.get("timeoutSeconds", DEFAULT_EXEC_TIMEOUT_SECONDS),
            "timeoutSeconds",
            0.001,
            MAX_EXEC_TIMEOUT_SECONDS,
        ),
        max_output=bounded_int(
            body.get("maxOutputBytes", DEFAULT_MAX_OUTPUT_BYTES),
            "maxOutputBytes",
            0,
            MAX_OUTPUT_BYTES_LIMIT,
        ),
    )


def exec_argv(command: Any, argv: Any) -> list[str]:
    if (command is None) == (argv is None):
        raise bad_request("give exactly one of command or argv")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise bad_request("command must be a non-empty string")
        return ["bash", "-lc", command]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise bad_request("argv must be a non-empty list of strings")
    return [str(part) for part in argv]


def exec_cwd(workspace: Workspace, cwd: Any) -> Path:
    if cwd is not None and not isinstance(cwd, str):
        raise bad_request("cwd must be a string")
    path = workspace.resolve(cwd or "")
    if not path.exists():
        raise not_found(cwd or ".")
    if not path.is_dir():
        raise bad_request(f"cwd is not a directory: {cwd!r}", "not_a_directory")
    return path


def exec_env(env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise bad_request("env must be an object of strings")
    for name, value in env.items():
        if not isinstance(value, str) or not name or "=" in name or "\x00" in name + value:
            raise bad_request(f"env entry {name!r} must be a NAME (no '=') with a string value")
    return cast(dict[str, str], env)


def run_exec(spec: ExecSpec, output: Output | None = None) -> JsonObject:
    started = time.monotonic()
    try:
        process = spawn(
            [sys.executable, "-I", "-S", str(REAPER), *spec.argv],
            cwd=spec.cwd,
            env=spec.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        code = 127 if isinstance(error, FileNotFoundError) else 126
        return exec_result(code, "", f"sandboxd: {spec.argv[0]}: {error.strerror}\n", started)
    stdout = OutputCollector(cast(IO[bytes], process.stdout), spec.max_output, "stdout", output)
    stderr = OutputCollector(cast(IO[bytes], process.stderr), spec.max_output, "stderr", output)
    stdout.start()
    stderr.start()
    timed_out = wait_or_kill(process, spec.timeout)
    # Background children may keep the pipes open: give them a moment, then stop waiting.
    grace = min(OUTPUT_GRACE_SECONDS, max(0.1, spec.timeout - (time.monotonic() - started)))
    for collector in (stdout, stderr):
        collector.join(grace)
    exit_code = None if timed_out else shell_exit_code(process.returncode)
    result = exec_result(exit_code, stdout.text(), stderr.text(), started)
    result["truncated"] = stdout.truncated or stderr.truncated
    result["timedOut"] = timed_out
    return result


def wait_or_kill(process: subprocess.Popen[bytes], timeout: float) -> bool:
    try:
        process.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        stop_tree(process)
        return True


def stop_tree(process: subprocess.Popen[bytes]) -> None:
    """The keeper kills every descendant and exits; one that does not (stopped, killed or
    wedged by the command itself) is killed with its process group."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)  # a keeper the command stopped hears the stop too
        os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=REAPER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.wait()


def shell_exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


def exec_result(exit_code: int | None, stdout: str, stderr: str, started: float) -> JsonObject:
    return {
        "exitCode": exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": False,
        "timedOut": False,
        "durationMs": int((time.monotonic() - started) * 1000),
    }
