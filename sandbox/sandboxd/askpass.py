"""The one way a git token reaches git: a private ``GIT_ASKPASS`` helper outside the workspace,
deleted after the call."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ApiError
from .workspace import Workspace


@contextmanager
def askpass_env(workspace: Workspace, token: str | None) -> Iterator[dict[str, str]]:
    """git's prompt environment; a token reaches git only through a private askpass helper."""
    env = {"GIT_TERMINAL_PROMPT": "0", "SSH_ASKPASS": "", "GCM_INTERACTIVE": "never"}
    if not token:
        yield env
        return
    directory = Path(tempfile.mkdtemp(prefix="sandboxd-askpass-"))  # mode 0700
    try:
        if directory.resolve().is_relative_to(workspace.root):
            raise ApiError(500, "internal", "the temporary directory is inside the workspace")
        env["GIT_ASKPASS"] = str(write_askpass(directory, token))
        yield env
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def write_askpass(directory: Path, token: str) -> Path:
    token_file = directory / "token"
    descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token)
    script = directory / "askpass"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  [Uu]sername*) echo x-access-token ;;\n"
        f"  *) cat {shlex.quote(str(token_file))} ;;\n"
        "esac\n"
    )
    script.chmod(0o700)
    return script
