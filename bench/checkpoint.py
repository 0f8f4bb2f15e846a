"""Turn checkpoints (issue 17): what ``POST /git/checkpoint`` costs a turn, measured as the agent
calls it (the sandboxd client over the local driver's Unix socket, a real sandbox).

1. A committed 20,000-file workspace with 10 files changed before each checkpoint (8 edited, 2
   new): the goal is <= 200 ms.
2. The 300 MB workspace of the snapshot benchmark (its binaries untracked, as a build's output
   would be when not ignored), 10 files changed: the first checkpoint (it writes every untracked
   file's object) and the next ones (the objects exist; each untracked file is hashed again).

Then a dry-run revert and a real revert of the last 10 changes on each."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import cmdline, descendants, ms, say, scratch, summary
from bench.workspace import generate

SESSION = "bench-checkpoint"


def _driver(home: Path) -> Any:
    from openagents.sandbox.client import SandboxClient
    from openagents.sandbox.local import LocalDriver
    from openagents.settings import Settings

    return LocalDriver(home, Settings().sandboxd_path, b"k" * 32, SandboxClient)


def run(args: Any) -> dict[str, Any]:
    samples = 3 if args.quick else 7
    files = 2_000 if args.quick else 20_000
    with scratch("checkpoint") as home:
        driver = _driver(home / "home")
        try:
            return {
                "samples": samples,
                "tracked": _measure(driver, home, 1, files, 20, commit_all=True, samples=samples),
                "large": _measure(
                    driver,
                    home,
                    2,
                    args.files,
                    args.workspace_mb,
                    commit_all=False,
                    samples=samples,
                ),
            }
        finally:
            driver.close()


def _measure(
    driver: Any,
    home: Path,
    generation: int,
    files: int,
    megabytes: int,
    *,
    commit_all: bool,
    samples: int,
) -> dict[str, Any]:
    from openagents.sandbox.client import SandboxClient

    handle = driver.start(f"{SESSION}-{generation}", 1)
    client = SandboxClient(driver.endpoint(handle), driver.token(handle), timeout=300)
    source = home / f"source-{generation}"
    source.mkdir()
    say(f"checkpoint: generating {megabytes} MB with {files} source files")
    content = generate(source, megabytes, files)
    if commit_all:
        _git(source, "add", "-A")
        _git(source, "commit", "-qm", "everything")
    _seed(client, source, home / f"seed-{generation}.tar.zst")
    # the real index's stat data fresh, as the agent's own git commands leave it in a session
    client.exec(argv=["git", "update-index", "-q", "--refresh"], timeout_seconds=300)
    sources = sorted((source / "src").rglob("*.py"))
    daemon = _sandboxd(int(handle.ref))
    timings: list[float] = []
    cpu: list[float] = []
    for sample in range(samples + 1):  # the first warms the page cache (and, large: the objects)
        _change(client, sources, sample)
        began, used = time.perf_counter(), _cpu(daemon)
        saved = client.checkpoint(f"refs/openagents/checkpoints/bench-{sample}")
        timings.append(time.perf_counter() - began)
        cpu.append(_cpu(daemon) - used)
    _change(client, sources, samples + 1)
    began = time.perf_counter()
    preview = client.revert(saved.ref, save_ref=None, dry_run=True)
    dry = time.perf_counter() - began
    began = time.perf_counter()
    client.revert(saved.ref, save_ref="refs/openagents/checkpoints/bench-undo", dry_run=False)
    real = time.perf_counter() - began
    driver.stop(handle)
    return {
        # files: every file of the workspace, .git's included; checkpointFiles: the checkpoint's
        "workspace": {"megabytes": round(content.bytes / 1e6, 1), "files": content.files},
        "checkpointFiles": saved.files,
        "firstCheckpointMs": ms(timings[0]),
        "checkpointMs": {k: round(v, 1) for k, v in summary([ms(t) for t in timings[1:]]).items()},
        # CPU time of sandboxd and its git processes: what the wall time is on an idle machine
        "checkpointCpuMs": {k: round(v, 1) for k, v in summary([ms(t) for t in cpu[1:]]).items()},
        "loadAverage": round(os.getloadavg()[0], 2),
        "dryRunRevertMs": ms(dry),
        "revertMs": ms(real),
        "revertTouched": len(preview.restored) + len(preview.removed),
    }


def _sandboxd(launcher: int) -> int:
    """The sandboxd process below the driver's child (prlimit, bubblewrap around it)."""
    for pid in [launcher, *descendants(launcher)]:
        if "sandboxd" in cmdline(pid) and "python" in cmdline(pid).split(" ")[0]:
            return pid
    raise RuntimeError(f"no sandboxd below {launcher}")


def _cpu(pid: int) -> float:
    """Seconds of CPU used by ``pid`` and its reaped children (each git call sandboxd ran)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _seed(client: Any, source: Path, archive: Path) -> None:
    """The generated workspace into the sandbox's empty one, as a resume restores it."""
    subprocess.run(  # noqa: S603 - a fixed pipeline over our own scratch paths
        [
            "/bin/bash",
            "-o",
            "pipefail",
            "-c",
            f"tar -C {source} -cf - . | zstd -3 -T0 -q -c > {archive}",
        ],
        check=True,
    )
    digest = hashlib.sha256()
    with open(archive, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    with open(archive, "rb") as handle:
        client.restore_from(handle, digest.hexdigest())


def _change(client: Any, sources: list[Path], sample: int) -> None:
    """10 changed files: 8 edited sources and 2 new ones, different each sample."""
    root = sources[0].parents[3]
    for offset in range(8):
        path = sources[(sample * 8 + offset) * 97 % len(sources)]
        client.write_file(path.relative_to(root).as_posix(), f"# changed in sample {sample}\n")
    for offset in range(2):
        client.write_file(f"new/sample_{sample}_{offset}.py", f"VALUE = {sample}\n")


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@e",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@e"}  # fmt: skip
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True)  # noqa: S603, S607


def rows(result: dict[str, Any]) -> list[list[str]]:
    found = []
    for key, label in (("tracked", "committed"), ("large", "untracked binaries")):
        r = result[key]
        w, c = r["workspace"], r["checkpointMs"]
        found.append(
            [
                f"checkpoint: {r['checkpointFiles']} files, {w['megabytes']} MB ({label})",
                f"{c['p50']} ms",
                f"CPU p50 {r['checkpointCpuMs']['p50']} ms (load {r['loadAverage']}); "
                f"p90 {c['p90']} ms, max {c['max']} ms over {c['n']}, 10 changed; "
                f"first {r['firstCheckpointMs']} ms; revert {r['revertMs']} ms "
                f"(dry run {r['dryRunRevertMs']} ms)",
            ]
        )
    return found
