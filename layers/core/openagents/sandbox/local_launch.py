"""How the one-machine driver launches sandboxd under bubblewrap: the fixed parts of the
command (the module, the keeper, the clean environment), the host folders staged for the
sandbox's uid, the pipes bubblewrap reports on and waits for, the child's cgroup."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from openagents.sandbox.confine import Cgroup
from openagents.sandbox.port import SandboxError

READY_TIMEOUT_SECONDS = 15
# sandboxd starts one way everywhere (the image too): the package's parent on PYTHONPATH and
# ``python3 -P -m sandboxd`` (-P: the working directory, the workspace, is never on sys.path).
# A module runs from its compiled .pyc (a main script is compiled again at every start).
SANDBOXD_MODULE = ("-P", "-m", "sandboxd")
SANDBOXD_MOUNT = "/opt/sandboxd"  # the package's parent inside a sandbox (the image's too)
# bubblewrap's parent: a shell in the sandbox's own session that waits for it (never the
# server). --die-with-parent ties the sandbox's pid namespace to it: whichever of them is killed
# (stop signals the keeper; someone may kill bwrap by hand), the whole sandbox goes
KEEPER = ("/bin/sh", "-c", '"$@"; exit $?', "keeper")
# bubblewrap's whole environment (exec'd through ``env -i``): pid 1 of the sandbox shows it in
# /proc/1/environ, so nothing of the server's (its PWD, its settings) may be in it
BWRAP_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",  # noqa: S108 - the sandbox's private tmpfs
    "PYTHONPATH": SANDBOXD_MOUNT,
}


class Staging:
    """The host folders a sandbox sees, bind-mounted under ``/mnt`` in a private mount
    namespace of the launcher (root), so that the sandbox's unprivileged uid reaches them
    without any host folder above them being opened to it (``/root``, a 0700 state folder)."""

    MOUNT = "/mnt"
    COPY_SIZE = "32m"

    def __init__(self, *, enabled: bool) -> None:
        self._enabled = enabled
        self._sources: list[tuple[Path, str]] = []  # (folder or ext4 image, "bind"|"image"|"copy")

    def add(self, path: Path, *, image: bool = False, copy: bool = False) -> str:
        """Where the sandbox's bind finds ``path``; with ``copy``, a copy of the (small,
        read-only) folder in a tmpfs of its own, so the sandbox's ``/proc/self/mountinfo``
        shows that tmpfs's ``/`` as the mount's source instead of the host folder's path (the
        state folder, the server's checkout)."""
        if not self._enabled:
            return str(path)
        self._sources.append((path, "image" if image else "copy" if copy else "bind"))
        return f"{self.MOUNT}/{len(self._sources) - 1}"

    def command(self) -> list[str]:
        if not self._enabled:
            return []
        lines = [
            "set -e",
            f"mount -t tmpfs -o mode=0755,size=64k openagents-stage {self.MOUNT}",
        ]
        for index, (source, kind) in enumerate(self._sources):
            target = f"{self.MOUNT}/{index}"
            quoted = shlex.quote(str(source))
            lines.append(f"mkdir {target}")
            if kind == "copy":
                lines += [
                    f"mount -t tmpfs -o mode=0755,size={self.COPY_SIZE},nosuid,nodev "
                    f"openagents-ro {target}",
                    f"cp -a {quoted}/. {target}/",
                ]
            else:
                how = "-o loop,nosuid,nodev" if kind == "image" else "--bind"
                lines.append(f"mount {how} {quoted} {target}")
        lines.append('exec "$@"')
        script = "\n".join(lines)
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            script,
            "stage",
        ]


class SyncPipes:
    """bwrap's --info-fd (it reports the sandbox's pid) and --block-fd (it waits until the
    network is configured before starting sandboxd), and the network stack's lifeline."""

    def __init__(self) -> None:
        self._open: set[int] = set()
        self._info_read, self.info_write = self._pipe()
        self.block_read, self._block_write = self._pipe()
        # held open by the sandbox's processes only: the network stack exits when they are gone
        self.lifeline, self._lifeline_write = self._pipe()

    def _pipe(self) -> tuple[int, int]:
        read, write = os.pipe()
        self._open |= {read, write}
        return read, write

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._open:
                self._open.discard(fd)
                os.close(fd)

    @property
    def child_fds(self) -> tuple[int, int, int]:
        return (self.info_write, self.block_read, self._lifeline_write)

    def child_pid(self) -> int:
        self._close(*self.child_fds)
        data = b""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while b"child-pid" not in data or not data.rstrip().endswith(b"}"):
            if time.monotonic() > deadline:
                raise SandboxError("bubblewrap did not report the sandbox's pid")
            chunk = os.read(self._info_read, 4096)
            if not chunk:
                break
            data += chunk
        self._close(self._info_read)
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SandboxError("bubblewrap did not report the sandbox's pid") from exc

    def release(self) -> None:
        os.write(self._block_write, b"1")
        self.close()

    def close(self) -> None:
        """Close what this process still holds (idempotent)."""
        self._close(*list(self._open))


def child_setup(cgroup: Cgroup | None) -> Callable[[], None]:
    def setup() -> None:
        if cgroup is not None:
            cgroup.join()

    return setup


def compile_sandboxd(sandboxd: Path) -> None:
    """sandboxd's .pyc files, by the interpreter the sandbox runs (its cache tag); best effort:
    a read-only checkout only costs the sandbox its compile."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(  # noqa: S603 - our own paths
            ["/usr/bin/python3", "-m", "compileall", "-q", str(sandboxd)],
            capture_output=True,
            timeout=30,
            check=False,
        )
