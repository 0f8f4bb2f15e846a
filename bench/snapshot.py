"""Snapshot and restore through the local driver (sandboxd streams ``tar | zstd -3 -T0`` over
HTTP, the driver hashes and fsyncs it, and verifies the manifest; restore streams it back into a
new generation and checks the sha256 and the file count) against the same pipelines run by hand
in the same benchmark: ``tar -cf - . | zstd -3 -T0`` to a file and ``zstd -d | tar -xf -``.

MB/s are workspace megabytes (10^6 bytes of file content) per second."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import say, scratch
from bench.workspace import generate, tree

SESSION = "bench-snapshot"


def _timed(command: str, cwd: Path) -> float:
    began = time.perf_counter()
    subprocess.run(  # noqa: S603 - fixed pipeline over our own paths
        ["/bin/bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        check=True,
    )
    return time.perf_counter() - began


def _driver(home: Path) -> Any:
    from openagents.sandbox.client import SandboxClient
    from openagents.sandbox.local import LocalDriver
    from openagents.settings import Settings

    return LocalDriver(home, Settings().sandboxd_path, b"k" * 32, SandboxClient)


def run(args: Any) -> dict[str, Any]:
    repeats = 1 if args.quick else 2
    with scratch("snapshot") as home:
        driver = _driver(home / "home")
        try:
            return _measure(driver, home, args, repeats)
        finally:
            driver.close()


def _measure(driver: Any, home: Path, args: Any, repeats: int) -> dict[str, Any]:
    first = driver.start(SESSION, 1)
    workspace = home / "home" / "sandboxes" / SESSION / "1" / "workspace"
    say(f"snapshot: generating {args.workspace_mb} MB with {args.files} source files")
    began = time.perf_counter()
    content = generate(workspace, args.workspace_mb, args.files)
    generated = time.perf_counter() - began
    archive = home / "by-hand.tar.zst"
    unpacked = home / "by-hand"
    by_hand_pack, by_hand_unpack, driver_pack, driver_restore, spawn = [], [], [], [], []
    ref = None
    generation = 2
    for _ in range(repeats):
        say("snapshot: tar | zstd by hand")
        by_hand_pack.append(_timed(f"tar -cf - . | zstd -3 -T0 -q -c > {archive}", workspace))
        shutil.rmtree(unpacked, ignore_errors=True)
        unpacked.mkdir()
        by_hand_unpack.append(_timed(f"zstd -d -q -c {archive} | tar -xf -", unpacked))
        say("snapshot: the local driver")
        if ref is not None:
            driver.delete_snapshot(ref)
        began = time.perf_counter()
        ref = driver.snapshot(first)
        driver_pack.append(time.perf_counter() - began)
        began = time.perf_counter()
        restored = driver.start(SESSION, generation, from_snapshot=ref)
        driver_restore.append(time.perf_counter() - began)
        target = home / "home" / "sandboxes" / SESSION / str(generation) / "workspace"
        if tree(target) != content:
            raise RuntimeError(f"restore mismatch: {tree(target)} != {content}")
        driver.stop(restored)
        shutil.rmtree(target.parent)
        began = time.perf_counter()
        empty = driver.start(SESSION, generation + 1)
        spawn.append(time.perf_counter() - began)
        driver.stop(empty)
        generation += 2
    if tree(unpacked) != content:
        raise RuntimeError("the by-hand restore differs from the workspace")
    assert ref is not None
    mb = content.bytes / 1e6

    def rate(seconds: list[float]) -> float:
        return round(mb / min(seconds), 1)

    return {
        "workspace": {
            "megabytes": round(mb, 1),
            "files": content.files,
            "archiveMegabytes": round(ref.size_bytes / 1e6, 1),
            "ratio": round(content.bytes / ref.size_bytes, 2),
            "generatedSeconds": round(generated, 1),
        },
        "repeats": repeats,
        "seconds": {
            "driverSnapshot": round(min(driver_pack), 3),
            "byHandPack": round(min(by_hand_pack), 3),
            "driverRestore": round(min(driver_restore), 3),
            "driverEmptyStart": round(min(spawn), 3),
            "byHandUnpack": round(min(by_hand_unpack), 3),
        },
        "megabytesPerSecond": {
            "driverSnapshot": rate(driver_pack),
            "byHandPack": rate(by_hand_pack),
            "driverRestore": rate(driver_restore),
            "byHandUnpack": rate(by_hand_unpack),
        },
        "ratios": {
            "snapshotVsByHand": round(min(by_hand_pack) / min(driver_pack), 2),
            "restoreVsByHand": round(min(by_hand_unpack) / min(driver_restore), 2),
        },
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    w, s, r = result["workspace"], result["seconds"], result["megabytesPerSecond"]
    shape = f"{w['megabytes']} MB, {w['files']} files -> {w['archiveMegabytes']} MB archive"
    return [
        [
            "snapshot: local driver",
            f"{r['driverSnapshot']} MB/s",
            f"{s['driverSnapshot']} s for {shape}; "
            f"{result['ratios']['snapshotVsByHand']}x the by-hand speed",
        ],
        ["snapshot: tar | zstd -3 -T0 by hand", f"{r['byHandPack']} MB/s", f"{s['byHandPack']} s"],
        [
            "restore: local driver",
            f"{r['driverRestore']} MB/s",
            f"{s['driverRestore']} s incl. a {s['driverEmptyStart']} s sandbox start; "
            f"{result['ratios']['restoreVsByHand']}x the by-hand speed",
        ],
        [
            "restore: zstd -d | tar -x by hand",
            f"{r['byHandUnpack']} MB/s",
            f"{s['byHandUnpack']} s",
        ],
    ]
