"""bash, grep, glob: commands in the sandbox through sandboxd's exec.

A running command is stoppable: it records its process group and its keeper (sandboxd runs each
command under a subreaper of its own, named in ``SANDBOXD_EXEC_REAPER``) in ``/tmp`` and, when
stop is requested, a second exec tells the keeper to stop — it kills every descendant of the
command, those that left its group (``setsid``, a double fork) included — and then kills the
group (all there is under a sandboxd without keepers), so the tool returns within about a
second and nothing of the command is left running.

A ``bash`` command runs once per tool call: its exec carries the call's id as its key, so the
step run again after a restart collects the first run's result (or waits for it) instead of
running it a second time; one that died with its sandbox is the model's error ``INTERRUPTED``.

While a ``bash`` command of the turn runs, its output so far is shown (``LiveOutput``): the
exec is streamed (``StreamingWorkspace.exec_stream``) and the call's preliminary output
``{status: "running", stdout, stderr, outputBytes}`` (each stream's last ``LIVE_TAIL_BYTES``)
sent at most every ``LIVE_EVERY_SECONDS``, at most ``LIVE_BUDGET_BYTES`` for the whole call;
the model and the stored message get the final output only, as before.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import ClassVar

from openagents.agent.models.port import JsonObject, JsonValue
from openagents.agent.sandbox import (
    ExecOutput,
    ExecResult,
    SandboxError,
    StreamingWorkspace,
    sandbox_error_text,
)
from openagents.agent.tools import ports
from openagents.agent.tools.base import (
    BaseTool,
    Cancelled,
    ToolContext,
    ToolFailure,
    ToolProgress,
    cap,
    flag,
    integer,
    string,
    workspace_path,
)
from openagents.agent.tools.files import under_env_file

MAX_TIMEOUT_SECONDS = 600
SEARCH_TIMEOUT_SECONDS = 30
MAX_MATCHES = 100
MATCHES_PER_FILE = 10
POLL_SECONDS = 0.1
LIVE_EVERY_SECONDS = 0.25  # a running command's output shown at most this often …
LIVE_TAIL_BYTES = 4096  # … its last bytes per stream …
LIVE_BUDGET_BYTES = 1 << 20  # … and at most this much in all, for one call
EXEC_OUTPUT_BYTES = 1 << 20
SANDBOX_TMP = "/tmp"  # noqa: S108 - the sandbox's own /tmp
_RM_RF = re.compile(r"\brm\s+(-\w*r\w*f|-\w*f\w*r|-r\s+-f|-f\s+-r|--recursive\s+--force)")
_DOT_ENV = re.compile(r"(^|[\s/'\"=<>:;|&(])\.env")
_SAFE = re.compile(r"[^\w-]")
# grep's globs are case-sensitive: .env, .ENV, .Env.local … all spelled out (fnmatch classes)
ENV_GLOB = ".[eE][nN][vV]*"
INTERRUPTED = (
    "The command was interrupted: its sandbox stopped while it ran (a restart). It may have "
    "run in part; check the workspace before running it again."
)


def needs_approval(command: str) -> str | None:
    if _RM_RF.search(command):
        return "The command deletes files recursively (rm -rf)"
    if _DOT_ENV.search(command):
        return "The command touches a .env file"
    return None


def _marker(call_id: str) -> str:
    return f"{SANDBOX_TMP}/openagents-{_SAFE.sub('_', call_id)[:80]}.pgid"


class LiveOutput:
    """A running command's output so far, shown through ``progress`` at most every ``every``
    seconds (by ``clock``), each stream's last ``tail`` bytes (a cut tail starts with "…"),
    until ``budget`` bytes of shown output (as JSON) are spent: then no more is shown."""

    def __init__(
        self,
        progress: ToolProgress,
        *,
        clock: Callable[[], float] = time.monotonic,
        every: float = LIVE_EVERY_SECONDS,
        tail: int = LIVE_TAIL_BYTES,
        budget: int = LIVE_BUDGET_BYTES,
    ) -> None:
        self._progress, self._clock = progress, clock
        self._every, self._tail, self._budget = every, tail, budget
        self._kept = {"stdout": bytearray(), "stderr": bytearray()}
        self._total = {"stdout": 0, "stderr": 0}
        self._shown_at: float | None = None
        self._new = False
        self.spent = 0
        self.shown = 0

    def add(self, piece: ExecOutput) -> None:
        kept = self._kept[piece.stream]
        kept += piece.data[-self._tail :]
        del kept[: max(0, len(kept) - self._tail)]
        self._total[piece.stream] += len(piece.data)
        self._new = self._new or bool(piece.data)
        self.tick()

    def tick(self) -> None:
        """Show what came since the last time, when it is time (and budget is left)."""
        now = self._clock()
        if not self._new or self.spent >= self._budget:
            return
        if self._shown_at is not None and now - self._shown_at < self._every:
            return
        output: JsonValue = {
            "status": "running",
            "stdout": self._text("stdout"),
            "stderr": self._text("stderr"),
            "outputBytes": self._total["stdout"] + self._total["stderr"],
        }
        size = len(json.dumps(output))
        if self.spent + size > self._budget:
            self.spent = self._budget
            return
        self.spent += size
        self.shown += 1
        self._shown_at, self._new = now, False
        self._progress(output)

    def _text(self, stream: str) -> str:
        text = bytes(self._kept[stream]).decode("utf-8", "replace")
        return "…" + text if self._total[stream] > len(self._kept[stream]) else text


Outcome = ExecOutput | ExecResult | Exception


def run_stoppable(
    context: ToolContext,
    command: str,
    *,
    cwd: str | None,
    timeout_seconds: float,
    env: Mapping[str, str] | None = None,
    key: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ExecResult:
    """Run ``command`` (bash) and return its result; ``Cancelled`` once stop is requested
    (the command's process group killed first); ``ToolFailure`` when sandboxd refuses it or
    the keyed command was interrupted. With the context's ``progress`` and a workspace that
    streams, the output so far is shown while it runs (``LiveOutput``, on ``clock``)."""
    marker = _marker(context.call_id)
    script = (
        f"trap 'rm -f {marker}' EXIT; echo \"$$ ${{SANDBOXD_EXEC_REAPER:-}}\" > {marker}; "
        'eval "$OPENAGENTS_COMMAND"'
    )
    full_env = {**(env or {}), "OPENAGENTS_COMMAND": command}
    workspace = context.workspace
    streamed = context.progress is not None and isinstance(workspace, StreamingWorkspace)

    def pieces() -> Iterator[ExecOutput | ExecResult]:
        if streamed and isinstance(workspace, StreamingWorkspace):
            yield from workspace.exec_stream(
                command=script,
                cwd=cwd,
                env=full_env,
                timeout_seconds=timeout_seconds,
                max_output_bytes=EXEC_OUTPUT_BYTES,
                key=key,
            )
            return
        yield workspace.exec(
            command=script,
            cwd=cwd,
            env=full_env,
            timeout_seconds=timeout_seconds,
            max_output_bytes=EXEC_OUTPUT_BYTES,
            key=key,
        )

    live = LiveOutput(context.progress or (lambda _: None), clock=clock)
    outcome = _wait(context, marker, pieces, live)
    if isinstance(outcome, SandboxError):
        raise ToolFailure(sandbox_error_text(outcome))
    if isinstance(outcome, Exception):
        raise outcome
    if outcome.interrupted:
        raise ToolFailure(INTERRUPTED)
    return outcome


def _wait(
    context: ToolContext,
    marker: str,
    pieces: Callable[[], Iterator[ExecOutput | ExecResult]],
    live: LiveOutput,
) -> ExecResult | Exception:
    """The command's result (or the error that ended it), from a thread of its own; its
    output shown meanwhile, stop polled every ``POLL_SECONDS``."""
    outcomes: queue.SimpleQueue[Outcome] = queue.SimpleQueue()

    def run() -> None:
        try:
            for piece in pieces():
                outcomes.put(piece)
        except Exception as error:  # told to the waiting thread, raised there
            outcomes.put(error)

    worker = threading.Thread(target=run, name=f"tool-{context.call_id}", daemon=True)
    worker.start()
    while True:
        try:
            outcome = outcomes.get(timeout=POLL_SECONDS)
        except queue.Empty:
            outcome = None
        if isinstance(outcome, ExecOutput):
            live.add(outcome)
        elif outcome is not None:
            return outcome
        else:
            live.tick()
        if context.cancelled():
            kill(context, marker)
            worker.join(3)
            raise Cancelled


def kill(context: ToolContext, marker: str) -> None:
    """Stop the command recorded in ``marker`` (retrying while it is not written yet): its
    keeper first, waited for (up to 5 s) while it kills every descendant, then its group."""
    script = (
        f"for i in 1 2 3 4 5 6 7 8 9 10; do if [ -s {marker} ]; then "
        f'read -r group keeper < {marker}; if [ -n "$keeper" ]; then '
        'kill -TERM "$keeper" 2>/dev/null; n=0; '
        'while kill -0 "$keeper" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done; '
        f'fi; kill -KILL -- -"$group" 2>/dev/null; rm -f {marker}; exit 0; fi; '
        "sleep 0.1; done"
    )
    with contextlib.suppress(SandboxError):  # the sandbox is gone: so is the command
        context.workspace.exec(argv=["bash", "-c", script], timeout_seconds=10)


def exec_output(result: ExecResult) -> dict[str, JsonValue]:
    output: dict[str, JsonValue] = {
        "exitCode": result.exit_code,
        "stdout": cap(result.stdout),
        "stderr": cap(result.stderr),
    }
    if result.timed_out:
        output["timedOut"] = True
    if result.truncated:
        output["truncated"] = True
    return output


class BashTool(BaseTool):
    name = "bash"
    description = (
        "Run a bash command in the workspace (default timeout 120 s). Set detached to start a "
        "long-running process such as a dev server in the background and return at once."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "cwd": {"type": "string", "description": "Working folder, relative to the workspace"},
            "detached": {"type": "boolean", "description": "Start in the background"},
            "timeoutSeconds": {"type": "integer", "description": "At most 600"},
        },
        "required": ["command"],
    }

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # what a running command's output is shown by (``LiveOutput``)

    def approval(self, arguments: JsonObject) -> str | None:
        command = arguments.get("command")
        return needs_approval(command) if isinstance(command, str) else None

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        command = string(arguments, "command")
        if not command.strip():
            raise ToolFailure("command must not be empty")
        cwd = workspace_path(arguments.get("cwd"), name="cwd", default=".")
        timeout = integer(arguments, "timeoutSeconds", context.bash_timeout_seconds, low=1)
        timeout = min(timeout, MAX_TIMEOUT_SECONDS)
        if flag(arguments, "detached"):
            return self._detached(command, cwd, context)
        result = run_stoppable(
            context,
            command,
            cwd=cwd,
            timeout_seconds=timeout,
            key=f"bash:{context.call_id}",
            clock=self._clock,
        )
        return exec_output(result)

    @staticmethod
    def _detached(command: str, cwd: str, context: ToolContext) -> JsonValue:
        log = f"{SANDBOX_TMP}/openagents-{_SAFE.sub('_', context.call_id)[:80]}.log"
        before = ports.listening(context.workspace)  # what listens already is not its own
        script = (
            f'nohup setsid bash -c "$OPENAGENTS_COMMAND" > {log} 2>&1 < /dev/null & '
            f"echo $!; sleep 1; head -c 4000 {log}"
        )
        try:
            result = context.workspace.exec(
                command=script,
                cwd=cwd,
                env={"OPENAGENTS_COMMAND": command},
                timeout_seconds=30,
                key=f"bash:{context.call_id}",
            )
        except SandboxError as error:
            raise ToolFailure(sandbox_error_text(error)) from error
        pid, _, first_output = result.stdout.partition("\n")
        started = int(pid) if pid.strip().isdigit() else None
        return {
            "pid": started,
            "log": log,
            "output": cap(first_output),
            "message": f"Started in the background; its output goes to {log}",
            **ports.previewable(ports.new_ports(context, before, started)),
        }


def _search(context: ToolContext, argv: list[str]) -> ExecResult:
    try:
        return context.workspace.exec(argv=argv, timeout_seconds=SEARCH_TIMEOUT_SECONDS)
    except SandboxError as error:
        raise ToolFailure(sandbox_error_text(error)) from error


class GrepTool(BaseTool):
    name = "grep"
    description = (
        f"Search file contents with a POSIX extended regular expression. At most {MAX_MATCHES} "
        f"matches ({MATCHES_PER_FILE} per file), as path:line:text. .env* files are never "
        "searched (read one by name: it needs the user's approval)."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "Folder or file, relative to the workspace"},
            "glob": {"type": "string", "description": "Only files whose name matches, e.g. *.py"},
            "caseSensitive": {"type": "boolean", "description": "Default true"},
        },
        "required": ["pattern"],
    }

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        pattern = string(arguments, "pattern")
        path = workspace_path(arguments.get("path"), name="path", default=".")
        argv = ["grep", "-rnHIEs", "--exclude-dir=.git", "--exclude-dir=lost+found"]
        argv += ["-m", str(MATCHES_PER_FILE)]
        if arguments.get("caseSensitive") is False:
            argv.append("-i")
        glob = arguments.get("glob")
        if isinstance(glob, str) and glob:
            argv.append(f"--include={glob}")
        # after --include: the last matching one wins; they hold for the named path too
        argv += [f"--exclude={ENV_GLOB}", f"--exclude-dir={ENV_GLOB}", "--null"]
        result = _search(context, [*argv, "--", pattern, path])
        if result.exit_code == 1:
            return "No matches"
        if result.exit_code not in (0, None) and not result.stdout:
            raise ToolFailure(result.stderr.strip() or f"grep exited with {result.exit_code}")
        lines = []
        for line in result.stdout.splitlines():
            name, nul, rest = line.partition("\0")
            name = name.removeprefix("./")
            if nul and not under_env_file(name):  # grep said which file (--null): never .env
                lines.append(f"{name}:{rest}")
        if not lines:
            return "No matches"
        more = len(lines) - MAX_MATCHES
        text = "\n".join(lines[:MAX_MATCHES])
        return cap(text + (f"\n… {more} more matches not shown" if more > 0 else ""))


class GlobTool(BaseTool):
    name = "glob"
    description = (
        "Find files by name pattern (e.g. **/*.py or src/*.ts), newest first, at most "
        f"{MAX_MATCHES}. .env* files are not listed."
    )
    input_schema: ClassVar[JsonObject] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "Folder to search, relative"},
            "limit": {"type": "integer", "description": f"At most {MAX_MATCHES}"},
        },
        "required": ["pattern"],
    }

    def run(self, arguments: JsonObject, context: ToolContext) -> JsonValue:
        pattern = string(arguments, "pattern").strip()
        if not pattern:
            raise ToolFailure("pattern must not be empty")
        start = workspace_path(arguments.get("path"), name="path", default=".")
        limit = min(integer(arguments, "limit", MAX_MATCHES, low=1), MAX_MATCHES)
        flat = pattern.replace("**/", "")
        test, value = ("-path", f"{start}/{flat}") if "/" in flat else ("-name", flat)
        script = (
            'find "$1" -type f -not -path "*/.git/*" -not -iname ".env*" -not -ipath "*/.env*/*" '
            '"$2" "$3" -printf "%T@\\t%p\\n" 2>/dev/null | sort -rn | head -n "$4"'
        )
        result = _search(context, ["bash", "-c", script, "glob", start, test, value, str(limit)])
        paths = [line.partition("\t")[2].removeprefix("./") for line in result.stdout.splitlines()]
        paths = [path for path in paths if path and not under_env_file(path)]
        return "\n".join(paths) if paths else "No files found"
