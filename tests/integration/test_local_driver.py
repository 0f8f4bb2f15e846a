"""The local sandbox driver with real sandboxd processes: isolation, limits, snapshots."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents.sandbox import local, local_processes
from openagents.sandbox.client import SandboxClient
from openagents.sandbox.local import LocalDriver
from openagents.sandbox.port import SandboxError, SandboxHandle, SandboxState, SnapshotRef
from openagents.settings import Settings

from tests.support import sandbox_workspace

KEY = b"k" * 32
SANDBOXD = Settings().sandboxd_path


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[LocalDriver]:
    local = LocalDriver(tmp_path / "home", SANDBOXD, KEY, SandboxClient)
    yield local
    local.close()


def client(driver: LocalDriver, handle: SandboxHandle) -> SandboxClient:
    assert handle.endpoint is not None
    return SandboxClient(handle.endpoint, driver.token(handle))


def tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_start_is_idempotent_and_probe_follows_the_process(driver: LocalDriver) -> None:
    handle = driver.start("s1", 1)
    assert driver.probe(handle).state is SandboxState.RUNNING
    assert driver.start("s1", 1) == handle  # a retried start returns the running sandbox
    driver.stop(handle)
    assert driver.probe(handle).state is SandboxState.STOPPED
    driver.stop(handle)  # stopping twice is fine
    unknown = SandboxHandle(driver="local", session_id="nope", generation=1, ref="999999")
    assert driver.probe(unknown).state is SandboxState.GONE


def test_a_launch_that_never_got_ready_is_tried_again(
    driver: LocalDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap's own set-up fails now and then on a loaded host, before any sandbox code
    runs: the first launch's sandbox is killed (its cgroup, network and socket with it) and a
    second one, in the same folder, starts; a launch that never gets ready fails the start."""
    real = LocalDriver._await_ready
    calls: list[int] = []

    def flaky(process: Any, root: Path) -> None:
        calls.append(process.pid)
        if len(calls) == 1:
            raise local.NeverReady("sandboxd did not start: bwrap: loopback: Failed RTM_NEWADDR")
        real(process, root)

    monkeypatch.setattr(LocalDriver, "_await_ready", staticmethod(flaky))
    handle = driver.start("flaky", 1)
    assert len(calls) == 2
    assert calls[0] != calls[1]  # the first process was killed, a second one launched
    assert driver.probe(handle).state is SandboxState.RUNNING
    assert client(driver, handle).exec("echo ok").stdout == "ok\n"

    def never(process: Any, root: Path) -> None:
        calls.append(process.pid)
        raise local.NeverReady("sandboxd did not start: no output")

    monkeypatch.setattr(LocalDriver, "_await_ready", staticmethod(never))
    calls.clear()
    with pytest.raises(SandboxError, match="sandboxd did not start"):
        driver.start("never", 1)
    assert len(calls) == local.LAUNCH_ATTEMPTS


def test_tokens_differ_per_generation_and_gate_sandboxd(driver: LocalDriver) -> None:
    first = driver.start("s2", 1)
    second = driver.start("s2", 2)
    assert driver.token(first) != driver.token(second)
    assert first.endpoint is not None
    with pytest.raises(SandboxError) as refused:
        SandboxClient(first.endpoint, driver.token(second)).health()
    assert refused.value.status == 401


def test_bubblewrap_confines_the_sandbox(driver: LocalDriver, tmp_path: Path) -> None:
    assert driver.isolated
    handle = driver.start("s3", 1)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    sandbox = client(driver, handle)
    looked = sandbox.exec(command=f"cat {outside}; id -u; cat /proc/self/status | grep CapEff")
    assert "secret" not in looked.stdout  # the host's files are not there
    assert "CapEff:\t0000000000000000" in looked.stdout  # no capabilities at all
    wrote = sandbox.exec(command="touch /usr/evil")
    assert wrote.exit_code != 0  # the system is read-only
    assert sandbox.exec(command="echo ok > inside.txt").exit_code == 0
    workspace = sandbox_workspace(handle.ref)
    assert (workspace / "inside.txt").read_text() == "ok\n"


def test_file_size_limit_applies(tmp_path: Path) -> None:
    from openagents.sandbox.confine import Limits

    small = LocalDriver(
        tmp_path / "home", SANDBOXD, KEY, SandboxClient, limits=Limits(file_size_bytes=1 << 20)
    )
    try:
        handle = small.start("s4", 1)
        result = client(small, handle).exec(command="head -c 2000000 /dev/zero > big.bin")
        assert result.exit_code != 0
    finally:
        small.close()


def test_snapshot_restore_round_trip_is_verified(driver: LocalDriver, tmp_path: Path) -> None:
    # Given a workspace with a git repository, text and binary files
    handle = driver.start("s5", 1)
    sandbox = client(driver, handle)
    sandbox.exec(
        command=(
            "git init -q -b main && git config user.email t@e && git config user.name T && "
            "mkdir -p src/deep && for i in $(seq 1 50); do echo line $i > src/deep/f$i.txt; done "
            "&& head -c 300000 /dev/urandom > blob.bin && git add -A && git commit -qm one "
            "&& echo dirty > src/uncommitted.txt"
        )
    )
    workspace = sandbox_workspace(handle.ref)
    before = tree(workspace)
    # When it is snapshotted, and a new generation starts from the snapshot
    ref = driver.snapshot(handle)
    assert driver.snapshot_file(ref).exists()
    assert ref.sha256 == hashlib.sha256(driver.snapshot_file(ref).read_bytes()).hexdigest()
    assert ref.manifest["fileCount"] >= 52
    driver.stop(handle)
    restored = driver.start("s5", 2, from_snapshot=ref)
    # Then every file is back, byte for byte, with git's HEAD and uncommitted work
    assert tree(sandbox_workspace(restored.ref)) == before
    status = client(driver, restored).git_status()
    assert status.untracked_count == 1
    driver.delete_snapshot(ref)
    assert not driver.snapshot_file(ref).exists()
    driver.delete_snapshot(ref)  # deleting twice is fine


def test_a_corrupted_snapshot_is_refused(driver: LocalDriver) -> None:
    handle = driver.start("s6", 1)
    client(driver, handle).exec(command="echo data > a.txt")
    ref = driver.snapshot(handle)
    data = bytearray(driver.snapshot_file(ref).read_bytes())
    data[len(data) // 2] ^= 0xFF
    driver.snapshot_file(ref).write_bytes(bytes(data))
    with pytest.raises(SandboxError):
        driver.start("s6", 2, from_snapshot=ref)
    bogus = SnapshotRef(
        driver="local",
        id="s6/1-20000101T000000000000Z.tar.zst",
        session_id="s6",
        generation=1,
        size_bytes=1,
        sha256="0" * 64,
        created_at=ref.created_at,
    )
    with pytest.raises(SandboxError, match="not found"):
        driver.start("s6", 3, from_snapshot=bogus)


def forget_in_this_process(handle: SandboxHandle) -> None:
    """As if this process were a new server: the sandbox is in no child table here."""
    child = local_processes.children.pop(int(handle.ref))
    assert child is not None


def test_a_new_server_adopts_a_proven_sandbox_and_never_a_stranger(
    driver: LocalDriver, tmp_path: Path
) -> None:
    import json
    import subprocess

    handle = driver.start("adopt", 1)
    client(driver, handle).exec("echo kept > a.txt")
    forget_in_this_process(handle)
    successor = LocalDriver(tmp_path / "home", SANDBOXD, KEY, SandboxClient)
    assert successor.running() == [handle]  # identity proven: pid, start time, cgroups, token
    assert successor.probe(handle).state is SandboxState.RUNNING
    # a record pointing at another process (its start time right, or forged) names a stranger
    root = tmp_path / "home" / "sandboxes" / "adopt" / "1"
    record = json.loads((root / local.PROCESS_RECORD).read_text())
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        start_time = local.process_start_time(stranger.pid)
        for forged in ({"start_time": start_time}, {"start_time": 1, "cgroups": []}):
            planted = record | {"pid": stranger.pid} | forged
            (root / local.PROCESS_RECORD).write_text(json.dumps(planted))
            fake = handle.model_copy(update={"ref": str(stranger.pid)})
            (root / "sandbox.json").write_text(fake.model_dump_json(by_alias=True))
            assert successor.probe(fake).state is SandboxState.STOPPED
            successor.stop(fake)
            assert successor.running() == []
            assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()
        (root / local.PROCESS_RECORD).write_text(json.dumps(record))
        (root / "sandbox.json").write_text(handle.model_dump_json(by_alias=True))
    successor.stop(handle)
    assert successor.probe(handle).state is SandboxState.STOPPED
    successor.close()


def test_a_launch_no_server_finished_is_stopped_and_a_dead_one_reboots_on_its_volume(
    driver: LocalDriver, tmp_path: Path
) -> None:
    handle = driver.start("reboot", 1)
    client(driver, handle).exec(
        "git init -q && git config user.email t@e && git config user.name T && echo one > f "
        "&& git add f && git commit -qm one && echo dirty > g"
    )
    # a server that died between launch and readiness: its process on record, no handle
    # (its process on record; or not even that: the server died right after the launch)
    half, bare = driver.start("half", 1), driver.start("bare", 1)
    for unfinished in (half, bare):
        forget_in_this_process(unfinished)
        (tmp_path / "home" / "sandboxes" / unfinished.session_id / "1" / "sandbox.json").unlink()
    (tmp_path / "home" / "sandboxes" / "bare" / "1" / local.PROCESS_RECORD).unlink()
    assert driver.running() == [handle]
    for unfinished in (half, bare):  # stopped: the one on record, the other in its own cgroups
        assert local.process_start_time(int(unfinished.ref), living=True) is None
    # a sandbox that died: the next generation starts on the same volume, every file kept
    driver.stop(handle)
    rebooted = driver.reboot(handle, 2)
    assert rebooted is not None
    assert rebooted.generation == 2
    answer = client(driver, rebooted).exec("git log -1 --format=%s; cat g")
    assert answer.stdout == "one\ndirty\n"
    assert driver.reboot(handle, 2) == rebooted  # idempotent: the running one
    driver.stop(rebooted)
    assert not driver.has_volume(handle)
    (tmp_path / "home" / "sandboxes" / "reboot" / "2" / "workspace.img").unlink()
    assert driver.reboot(rebooted, 3) is None  # no volume: nothing to reboot


def test_a_dead_generation_leaves_no_cgroup_and_a_restored_one_no_old_volume(
    driver: LocalDriver, tmp_path: Path
) -> None:
    import json
    import os
    import signal

    sandboxes = tmp_path / "home" / "sandboxes"
    handle = driver.start("sweep", 1)
    ref = driver.snapshot(handle)
    record = json.loads((sandboxes / "sweep" / "1" / local.PROCESS_RECORD).read_text())
    assert record["cgroups"], "this machine gives sandboxes cgroups"
    # killed by hand while no server ran: the next server's sweep removes its cgroups
    forget_in_this_process(handle)
    os.kill(int(handle.ref), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while local.process_start_time(record["pid"], living=True) is not None:
        assert time.monotonic() < deadline, "the killed sandbox is still running"
        time.sleep(0.05)
    assert driver.running() == []
    assert not any(Path(folder).exists() for folder in record["cgroups"])
    assert not (sandboxes / "sweep" / "1" / local.PROCESS_RECORD).exists()
    # restored (verified) into the next generation: the old volume goes
    assert (sandboxes / "sweep" / "1" / "workspace.img").exists()
    restored = driver.start("sweep", 2, from_snapshot=ref)
    assert not (sandboxes / "sweep" / "1" / "workspace.img").exists()
    assert (sandboxes / "sweep" / "2" / "workspace.img").exists()
    driver.stop(restored)


def test_sandboxes_of_two_homes_never_share_a_host_uid_or_the_server_environment(
    driver: LocalDriver, tmp_path: Path
) -> None:
    other = LocalDriver(tmp_path / "other", SANDBOXD, KEY, SandboxClient)
    try:
        mine, theirs = driver.start("u", 1), other.start("u", 1)
        uids = {
            (tmp_path / home / "sandboxes" / "u" / "1" / "uid").read_text()
            for home in ("home", "other")
        }
        assert len(uids) == 2
        environ = client(driver, mine).exec("tr '\\0' '\\n' < /proc/1/environ").stdout
        assert sorted(environ.split()) == sorted(f"{k}={v}" for k, v in local.BWRAP_ENV.items())
        other.stop(theirs)
    finally:
        other.close()
