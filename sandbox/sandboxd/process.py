"""Child processes: the minimal environment every child gets, a tool run with a time limit,
killing, and a pipeline's failures."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

from .errors import ApiError
from .workspace import Workspace

CHUNK_BYTES = 1 << 20  # one read from a pipe, a file or a request body
# Inherited by children when set: identity, temp dir and the proxies git may need.
PASSED_THROUGH_ENV = (
    "TMPDIR", "USER", "LOGNAME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip


def base_env(workspace: Workspace) -> dict[str, str]:
    """The minimal environment of every child: the daemon's own environment never leaks."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(workspace.root)),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "SANDBOX_WORKSPACE": str(workspace.root),
        # git must never find a repository above the workspace (a local sandbox lives inside
        # the project's own checkout).
        "GIT_CEILING_DIRECTORIES": str(workspace.root.parent),
    }
    for name in PASSED_THROUGH_ENV:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def tool_env(workspace: Workspace) -> dict[str, str]:
    return {**base_env(workspace), "LC_ALL": "C"}


def spawn(argv: list[str], **options: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, **options)  # noqa: S603 - argv lists, never a shell string


def run_tool(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(  # noqa: S603 - argv lists, never a shell string
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ApiError(500, "tool_timeout", f"{argv[0]} timed out after {timeout:g}s") from error


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


PipelineStep = tuple[str, "subprocess.Popen[bytes]", IO[bytes], tuple[int, ...]]


def pipeline_problem(*steps: PipelineStep) -> str | None:
    """The first failed step's stderr, or None when every step exited with an accepted code."""
    problems = []
    for name, process, errors, accepted in steps:
        code = process.wait()
        if code not in accepted:
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip()[-2000:]
            problems.append(f"{name} exited with {code}: {message}")
    return "; ".join(problems) or None


def kill_all(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
