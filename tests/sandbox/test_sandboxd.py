"""sandboxd's protocol end to end: the real daemon, driven through SandboxClient."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import signal
import subprocess
import tarfile
import threading
import time
import urllib.request
from http.client import IncompleteRead
from pathlib import Path

import pytest
from openagents.sandbox.answers import (
    ExecResult,
    FileContent,
    FileEntry,
    FileList,
    FileWritten,
    GitStatus,
    Health,
    PreparedWorkspace,
    Restored,
    Synced,
)
from openagents.sandbox.client import SandboxClient, SandboxRequestError
from openagents.sandbox.git_answers import GitBranch
from openagents.sandbox.port import SandboxError

from tests.sandbox.conftest import (
    SANDBOXD_ARGV,
    SANDBOXD_ENV,
    CredentialRecorder,
    Origin,
    RunningSandbox,
    StartSandbox,
    prepare,
    raw_call,
    tree_digest,
)

ENDPOINTS = [
    ("GET", "/health"),
    ("POST", "/exec"),
    ("GET", "/files"),
    ("GET", "/files/content?path=a"),
    ("PUT", "/files/content"),
    ("POST", "/workspace/prepare"),
    ("GET", "/git/branch"),
    ("GET", "/git/status"),
    ("GET", "/git/diff"),
    ("POST", "/git/checkpoint"),
    ("POST", "/git/revert"),
    ("GET", "/git/remote"),
    ("POST", "/git/commit"),
    ("POST", "/git/upstream"),
    ("POST", "/git/archive"),
    ("POST", "/git/bundle"),
    ("POST", "/git/bundle/restore"),
    ("POST", "/snapshot"),
    ("GET", "/snapshots/snap-1/manifest"),
    ("POST", "/restore"),
    ("POST", "/sync"),
    ("GET", "/ports"),
    ("GET", "/ports/8080/tunnel"),
    ("GET", "/no/such/endpoint"),
]


def expect_error(status: int, code: str) -> pytest.RaisesExc[SandboxRequestError]:
    return pytest.raises(SandboxRequestError, match=f"status code {status} {code}")


# ---------------------------------------------------------------------------- start, auth


def test_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    completed = subprocess.run(
        [*SANDBOXD_ARGV, "--port", "0", "--workspace", str(tmp_path)],
        env={"PATH": os.environ["PATH"], **SANDBOXD_ENV},
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert completed.returncode != 0
    assert completed.stdout == ""
    assert "SANDBOXD_TOKEN is required" in completed.stderr


def test_a_module_in_the_working_directory_is_never_imported(tmp_path: Path) -> None:
    """sandboxd starts with -P: its working directory (in a sandbox, the workspace) is not on
    sys.path, so a hostile ``hashlib.py`` there cannot stand in for the real module."""
    (tmp_path / "hashlib.py").write_text("raise SystemExit('hijacked')\n")
    completed = subprocess.run(
        [*SANDBOXD_ARGV, "--port", "0", "--workspace", str(tmp_path)],
        env={"PATH": os.environ["PATH"], **SANDBOXD_ENV}, cwd=tmp_path,
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    assert "hijacked" not in completed.stderr
    assert "SANDBOXD_TOKEN is required" in completed.stderr  # it got past every import


def test_health_reports_the_workspace(sandbox: RunningSandbox, client: SandboxClient) -> None:
    assert client.health() == Health(ok=True, version=1, workspace=str(sandbox.workspace))


def test_every_endpoint_needs_the_token(sandbox: RunningSandbox) -> None:
    wrong = {"Authorization": "Bearer " + "0" * len(sandbox.token)}
    basic = {"Authorization": f"Basic {sandbox.token}"}
    for method, path in ENDPOINTS:
        data = b"{}" if method in ("POST", "PUT") else None
        for headers in ({}, wrong, basic):
            status, body = raw_call(sandbox.endpoint, method, path, headers=headers, data=data)
            assert (status, body["code"]) == (401, "unauthorized"), (method, path, headers)
    assert sandbox.token not in sandbox.log_path.read_text()


# ---------------------------------------------------------------------------- exec


def test_exec_reports_exit_code_and_both_streams(client: SandboxClient) -> None:
    result = client.exec("echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert result.timed_out is False
    assert result.truncated is False
    assert client.exec(argv=["printf", "%s|", "a b", "c"]).stdout == "a b|c|"


def test_exec_env_is_minimal_and_merged(sandbox: RunningSandbox, client: SandboxClient) -> None:
    result = client.exec('echo "$GREETING"; env', env={"GREETING": "hello there"})
    assert result.stdout.startswith("hello there\n")
    assert sandbox.token not in result.stdout
    assert "SANDBOXD_TOKEN" not in result.stdout


def test_exec_cwd_is_confined(sandbox: RunningSandbox, client: SandboxClient) -> None:
    client.write_file("sub/dir/file.txt", "x")
    assert client.exec("pwd", cwd="sub/dir").stdout == f"{sandbox.workspace}/sub/dir\n"
    for outside in ("..", "/tmp", "sub/../../x"):
        with expect_error(400, "path_outside_workspace"):
            client.exec("pwd", cwd=outside)
    with expect_error(404, "not_found"):
        client.exec("pwd", cwd="missing")


def test_exec_input_is_checked(client: SandboxClient) -> None:
    with expect_error(400, "bad_request"):
        client.exec("true", argv=["true"])
    with expect_error(400, "bad_request"):
        client.exec()
    with expect_error(400, "bad_request"):
        client.exec("true", timeout_seconds=601)


def test_exec_timeout_kills_the_process_group(
    sandbox: RunningSandbox, client: SandboxClient
) -> None:
    started = time.monotonic()
    result = client.exec("sleep 30 & echo $! > bg.pid; sleep 30", timeout_seconds=1)
    assert time.monotonic() - started < 5
    assert result.timed_out is True
    assert result.exit_code is None
    background = int((sandbox.workspace / "bg.pid").read_text())
    assert wait_until_gone(background)


ESCAPES = (
    "setsid sh -c 'echo $$ > a.pid; exec sleep 1000' > /dev/null 2>&1 & "
    "( setsid sh -c 'echo $$ > b.pid; exec sleep 1000' > /dev/null 2>&1 & ) ; "
    "nohup sh -c 'echo $$ > c.pid; exec sleep 1000' > /dev/null 2>&1 & "
    "while [ ! -s a.pid ] || [ ! -s b.pid ] || [ ! -s c.pid ]; do sleep 0.01; done; "
)


def test_exec_timeout_kills_descendants_that_left_the_group(
    sandbox: RunningSandbox, client: SandboxClient
) -> None:
    """setsid, a double fork and nohup each leave the command's process group: the timeout
    kills them all the same (the exec's keeper is their subreaper)."""
    result = client.exec(ESCAPES + "sleep 30", timeout_seconds=1)
    assert result.timed_out is True
    for name in ("a.pid", "b.pid", "c.pid"):
        assert wait_until_gone(int((sandbox.workspace / name).read_text())), name


def test_a_command_that_ends_in_time_leaves_its_background_server_running(
    sandbox: RunningSandbox, client: SandboxClient
) -> None:
    """What a command starts detached on purpose (a dev server) outlives the command."""
    result = client.exec(ESCAPES + "echo launched", timeout_seconds=30)
    assert (result.exit_code, result.stdout) == (0, "launched\n")
    pids = [int((sandbox.workspace / name).read_text()) for name in ("a.pid", "b.pid", "c.pid")]
    try:
        assert not any(wait_until_gone(pid, attempts=1) for pid in pids)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_stopped_keeper_kills_every_descendant(
    sandbox: RunningSandbox, client: SandboxClient
) -> None:
    """The agent's stop: SIGTERM to the keeper the command names in SANDBOXD_EXEC_REAPER."""
    answers: list[ExecResult] = []
    script = 'echo "$SANDBOXD_EXEC_REAPER" > keeper.pid; ' + ESCAPES + "touch ready; sleep 60"
    worker = threading.Thread(
        target=lambda: answers.append(client.exec(script, timeout_seconds=60))
    )
    worker.start()
    ready = sandbox.workspace / "ready"
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert time.monotonic() < deadline, "the command never got ready"
        time.sleep(0.02)
    keeper = int((sandbox.workspace / "keeper.pid").read_text())
    assert client.exec(f"kill -TERM {keeper}").exit_code == 0
    worker.join(10)
    assert len(answers) == 1
    assert answers[0].exit_code == 137, answers
    for name in ("a.pid", "b.pid", "c.pid"):
        assert wait_until_gone(int((sandbox.workspace / name).read_text())), name


def wait_until_gone(pid: int, attempts: int = 40) -> bool:
    for _ in range(attempts):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_exec_output_is_capped_and_marked(client: SandboxClient) -> None:
    result = client.exec("head -c 5000 /dev/zero | tr '\\0' a; echo done >&2", max_output_bytes=100)
    assert result.stdout == "a" * 100
    assert result.stderr == "done\n"
    assert result.truncated is True
    assert result.exit_code == 0


# ---------------------------------------------------------------------------- files


def test_files_write_list_and_read(client: SandboxClient) -> None:
    assert client.write_file("dir/a.txt", "héllo\n") == FileWritten("dir/a.txt", 7)
    client.write_file("dir/deeper/b.txt", "b")
    client.exec("ln -s a.txt dir/link && mkdir -p .git/objects/aa && touch .git/objects/aa/x")
    top = client.list_files()
    assert top == FileList((FileEntry(".git", "dir", 0), FileEntry("dir", "dir", 0)), False)
    paths = {entry.path: entry for entry in client.list_files(depth=5).entries}
    assert set(paths) == {".git", "dir", "dir/a.txt", "dir/deeper", "dir/deeper/b.txt", "dir/link"}
    assert paths["dir/a.txt"] == FileEntry("dir/a.txt", "file", 7)
    assert paths["dir/link"].type == "symlink"
    assert [e.path for e in client.list_files("dir/deeper").entries] == ["dir/deeper/b.txt"]
    read = client.read_file("dir/a.txt")
    assert read == FileContent("dir/a.txt", "héllo\n", "utf-8", 7, truncated=False)
    assert client.read_file("dir/link").content == "héllo\n"  # a symlink inside is fine


def test_files_binary_and_truncated_reads(client: SandboxClient) -> None:
    payload = bytes(range(256)) * 4
    assert client.write_file("bin/blob.dat", payload).size == len(payload)
    read = client.read_file("bin/blob.dat")
    assert read.encoding == "base64"
    assert base64.b64decode(read.content) == payload
    assert client.read_bytes("bin/blob.dat") == payload
    partial = client.read_file("bin/blob.dat", max_bytes=10)
    assert partial.truncated is True
    assert partial.size == len(payload)
    assert base64.b64decode(partial.content) == payload[:10]
    client.write_file("text.txt", "ab€")  # a cut in the middle of '€' drops the partial char
    assert client.read_file("text.txt", max_bytes=3).content == "ab"


def test_files_errors(client: SandboxClient) -> None:
    with expect_error(404, "not_found"):
        client.read_file("missing.txt")
    with expect_error(404, "not_found"):
        client.list_files("missing")
    client.write_file("d/f.txt", "x")
    with expect_error(400, "not_a_file"):
        client.read_file("d")
    with expect_error(400, "not_a_directory"):
        client.list_files("d/f.txt")
    with expect_error(400, "bad_request"):
        client.list_files(depth=6)


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a/../b/../../x", "nul\x00x"])
def test_paths_that_leave_the_workspace_are_refused(client: SandboxClient, path: str) -> None:
    with expect_error(400, "path_outside_workspace"):
        client.read_file(path)
    with expect_error(400, "path_outside_workspace"):
        client.write_file(path, "x")
    with expect_error(400, "path_outside_workspace"):
        client.list_files(path)


def test_symlinks_cannot_escape(
    sandbox: RunningSandbox, client: SandboxClient, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (sandbox.workspace / "link_file").symlink_to(outside / "secret.txt")
    (sandbox.workspace / "link_dir").symlink_to(outside)
    (sandbox.workspace / "nested").mkdir()
    (sandbox.workspace / "nested" / "up").symlink_to("../..")
    for path in ("link_file", "link_dir/secret.txt", "nested/up/outside/secret.txt"):
        with expect_error(400, "path_outside_workspace"):
            client.read_file(path)
    for path in ("link_file", "link_dir/new.txt", "link_dir/sub/new.txt"):
        with expect_error(400, "path_outside_workspace"):
            client.write_file(path, "pwned")
    with expect_error(400, "path_outside_workspace"):
        client.list_files("link_dir")
    with expect_error(400, "path_outside_workspace"):
        client.exec("pwd", cwd="link_dir")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


# ---------------------------------------------------------------------------- prepare


def test_prepare_checks_out_an_existing_branch(
    sandbox: RunningSandbox, client: SandboxClient, origin: Origin
) -> None:
    result = prepare(client, origin, "feature")
    assert result == PreparedWorkspace("feature", origin.feature_head, "main")
    assert (sandbox.workspace / "feature.txt").read_text() == "feature work\n"
    assert client.git_branch() == GitBranch(branch="feature", head=origin.feature_head)
    identity = client.exec("git config user.name; git config user.email").stdout
    assert identity == "Ada Agent\nada@example.com\n"
    upstream = client.exec("git rev-parse --abbrev-ref @{upstream}").stdout
    assert upstream == "origin/feature\n"
    assert not list(sandbox.workspace.glob(".sandboxd-clone-*"))


def test_prepare_creates_a_new_branch_from_the_default_branch(
    client: SandboxClient, origin: Origin
) -> None:
    result = prepare(client, origin, "agent/new-work", new=True)
    assert result == PreparedWorkspace("agent/new-work", origin.main_head, "main")
    assert client.git_branch().branch == "agent/new-work"
    assert client.git_status().ahead == 0


def test_prepare_is_idempotent(client: SandboxClient, origin: Origin) -> None:
    first = prepare(client, origin, "agent/again", new=True)
    client.write_file("scratch.txt", "kept")
    assert prepare(client, origin, "agent/again", new=True) == first
    assert client.read_file("scratch.txt").content == "kept"
    assert prepare(client, origin, "feature").head == origin.feature_head
    with expect_error(409, "workspace_not_empty"):
        client.prepare_workspace(
            "file:///elsewhere.git", branch=None, is_new_branch=False,
            git_name="A", git_email="a@example.com",
        )  # fmt: skip


def test_prepare_refuses_bad_requests(client: SandboxClient, origin: Origin) -> None:
    with expect_error(400, "invalid_branch"):
        prepare(client, origin, "bad..name")
    with expect_error(400, "bad_request"):
        prepare(client, origin, None, new=True)
    with expect_error(409, "branch_exists"):
        prepare(client, origin, "feature", new=True)
    with expect_error(422, "branch_not_found"):
        prepare(client, origin, "no-such-branch")


def test_prepare_refuses_a_non_empty_workspace(client: SandboxClient, origin: Origin) -> None:
    client.write_file("stray.txt", "x")
    with expect_error(409, "workspace_not_empty"):
        prepare(client, origin, "feature")


def test_git_in_the_sandbox_never_answers_a_credential_prompt(
    sandbox: RunningSandbox, client: SandboxClient, credential_remote: str
) -> None:
    # a remote that asks for credentials gets none: no askpass, no prompt, no helper
    with expect_error(422, "git_failed"):
        client.prepare_workspace(
            credential_remote, branch=None, is_new_branch=False,
            git_name="A", git_email="a@example.com",
        )  # fmt: skip
    assert CredentialRecorder.seen == []
    assert list(sandbox.tmpdir.iterdir()) == []
    assert list(sandbox.workspace.iterdir()) == []


def test_sandboxd_has_no_push_endpoint(sandbox: RunningSandbox) -> None:
    headers = {"Authorization": f"Bearer {sandbox.token}"}
    body = b'{"branch": "feature", "token": "ghs_x"}'
    status, answer = raw_call(sandbox.endpoint, "POST", "/git/push", headers=headers, data=body)
    assert (status, answer["code"]) == (404, "not_found")


# ---------------------------------------------------------------------------- git status, diff


def make_changes(client: SandboxClient) -> None:
    """On a new branch: one commit, staged/unstaged/untracked changes, a rename, a lock file."""
    client.write_file("committed.txt", "on the branch\n")
    client.exec("git add committed.txt && git commit --quiet -m 'branch work'")
    client.write_file("src/app.py", "def main():\n    return 2\n\n\nprint(main())\nprint('x')\n")
    client.write_file("README.md", "# Demo\n\nA small project.\nMore words.\n")
    client.write_file("package-lock.json", '{\n  "lockfileVersion": 3,\n  "x": 1,\n  "y": 2\n}\n')
    client.write_file("notes.txt", "one\ntwo\nthree\n")
    staged = (
        "git add src/app.py && git rm --quiet docs/old.txt && git mv docs/guide.md docs/manual.md"
    )
    assert client.exec(staged).exit_code == 0


def test_git_status_counts(client: SandboxClient, origin: Origin) -> None:
    prepare(client, origin, "agent/status", new=True)
    make_changes(client)
    status = client.git_status()
    files = {item.path: item.status for item in status.uncommitted_files}
    assert dataclasses.replace(status, uncommitted_files=()) == GitStatus(
        branch="agent/status",
        is_detached_head=False,
        has_uncommitted_changes=True,
        has_unpushed_commits=True,
        staged_count=3,
        unstaged_count=2,
        untracked_count=1,
        ahead=1,
        behind=0,
        uncommitted_files=(),
    )
    assert files == {
        "src/app.py": "modified",
        "docs/old.txt": "deleted",
        "docs/manual.md": "renamed",
        "README.md": "modified",
        "package-lock.json": "modified",
        "notes.txt": "untracked",
    }


def test_git_status_with_upstream_and_detached_head(client: SandboxClient, origin: Origin) -> None:
    prepare(client, origin, "feature")
    status = client.git_status()
    assert (status.ahead, status.has_uncommitted_changes) == (0, False)
    client.exec(
        "git commit --quiet --allow-empty -m one && git commit --quiet --allow-empty -m two"
    )
    assert client.git_status().ahead == 2
    client.exec("git switch --quiet --detach HEAD~1")
    detached = client.git_status()
    assert (detached.branch, detached.is_detached_head) == (None, True)
    head = client.exec("git rev-parse HEAD").stdout.strip()
    assert client.git_branch() == GitBranch(branch=None, head=head)


def test_git_diff_against_the_merge_base(client: SandboxClient, origin: Origin) -> None:
    prepare(client, origin, "agent/diff", new=True)
    make_changes(client)
    diff = client.git_diff()
    assert (diff.base, diff.base_ref) == (origin.main_head, "origin/main")
    summary = [(f.status, f.path, f.additions, f.deletions, f.diff is None) for f in diff.files]
    assert summary == [
        ("modified", "README.md", 1, 0, False),
        ("modified", "package-lock.json", 3, 1, True),
        ("modified", "src/app.py", 2, 1, False),
        ("added", "committed.txt", 1, 0, False),
        ("added", "notes.txt", 3, 0, False),
        ("renamed", "docs/manual.md", 0, 0, False),
        ("deleted", "docs/old.txt", 0, 3, False),
    ]
    assert (diff.total_additions, diff.total_deletions) == (10, 5)
    by_path = {f.path: f for f in diff.files}
    assert by_path["docs/manual.md"].old_path == "docs/guide.md"
    assert "+    return 2" in (by_path["src/app.py"].diff or "")
    assert "@@ -0,0 +1,3 @@\n+one\n+two\n+three\n" in (by_path["notes.txt"].diff or "")


def test_git_diff_without_commits_or_repository(client: SandboxClient) -> None:
    with expect_error(409, "not_a_repository"):
        client.git_diff()
    with expect_error(409, "not_a_repository"):
        client.git_status()
    client.exec("git init --quiet -b main")
    client.write_file("first.txt", "a\nb")
    diff = client.git_diff()
    assert diff.base is None
    [only] = diff.files
    assert (only.path, only.status, only.additions) == ("first.txt", "added", 2)
    assert (only.diff or "").endswith("+b\n\\ No newline at end of file\n")
    assert client.git_branch() == GitBranch(branch="main", head=None)


# ---------------------------------------------------------------------------- snapshot, restore


def fill_workspace(sandbox: RunningSandbox, client: SandboxClient, origin: Origin) -> None:
    prepare(client, origin, "feature")
    client.write_file("untracked/data.bin", os.urandom(200_000))
    client.write_file("untracked/notes.md", "notes\n" * 1000)
    client.write_file("run.sh", "#!/bin/sh\necho run\n")
    client.exec("chmod +x run.sh && ln -s untracked/notes.md notes-link && git add run.sh")


def test_snapshot_and_restore_round_trip(
    start_sandbox: StartSandbox, origin: Origin, tmp_path: Path
) -> None:
    source, target = start_sandbox("source"), start_sandbox("target")
    fill_workspace(source, source.client, origin)
    archive = tmp_path / "workspace.tar.zst"
    with open(archive, "wb") as sink:
        manifest = source.client.snapshot_to(sink)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert (manifest.sha256, manifest.archive_bytes) == (digest, archive.stat().st_size)
    assert manifest.git_head == origin.feature_head
    assert "1 A. N... 000000 100755 100755" in str(manifest.as_json()["gitStatus"])
    assert manifest.id is not None
    assert source.client.snapshot_manifest(manifest.id).as_json() == manifest.as_json()
    files = [p for p in source.workspace.rglob("*") if p.is_symlink() or not p.is_dir()]
    assert manifest.file_count == len(files)
    assert manifest.bytes == sum(p.stat().st_size for p in files if not p.is_symlink())

    with open(archive, "rb") as stream:
        restored = target.client.restore_from(stream, digest)
    assert restored == Restored(
        file_count=manifest.file_count, bytes=manifest.bytes, sha256=digest,
        git_head=origin.feature_head,
    )  # fmt: skip
    assert tree_digest(target.workspace) == tree_digest(source.workspace)
    assert target.client.git_status() == source.client.git_status()
    with open(archive, "rb") as stream, expect_error(409, "workspace_not_empty"):
        target.client.restore_from(stream, digest)


def test_restore_with_a_wrong_checksum_leaves_an_empty_workspace(
    start_sandbox: StartSandbox, origin: Origin
) -> None:
    source, target = start_sandbox("source"), start_sandbox("target")
    prepare(source.client, origin, "feature")
    sink = io.BytesIO()
    source.client.snapshot_to(sink)
    with expect_error(422, "checksum_mismatch"):
        target.client.restore_from(io.BytesIO(sink.getvalue()), "0" * 64)
    assert list(target.workspace.iterdir()) == []
    status, body = raw_call(
        target.endpoint, "POST", "/restore", data=sink.getvalue(),
        headers={"Authorization": f"Bearer {target.token}"},
    )  # fmt: skip
    assert (status, body["code"]) == (400, "missing_checksum")


def evil_archive(tmp_path: Path, members: list[tarfile.TarInfo]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for member in members:
            data = b"pwned\n" if member.isfile() else b""
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    compressed = subprocess.run(
        ["zstd", "-q", "-c"], input=buffer.getvalue(), capture_output=True, check=True
    )
    return compressed.stdout


def member(name: str, link_to: str | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    if link_to is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link_to
    return info


def test_restore_refuses_archives_that_escape(
    sandbox: RunningSandbox, client: SandboxClient, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cases = {
        "dotdot": [member("ok.txt"), member("../evil")],
        "absolute": [member("ok.txt"), member(str(outside / "abs-evil"))],
        "symlink": [member("link", link_to=str(outside)), member("link/evil")],
    }
    for name, members in cases.items():
        archive = evil_archive(tmp_path, members)
        digest = hashlib.sha256(archive).hexdigest()
        with expect_error(422, "archive_rejected"):
            client.restore_from(io.BytesIO(archive), digest)
        assert list(sandbox.workspace.iterdir()) == [], name
    assert not (sandbox.workspace.parent / "evil").exists()
    assert list(outside.iterdir()) == []


def test_a_broken_snapshot_stream_never_verifies(
    start_sandbox: StartSandbox, tmp_path: Path
) -> None:
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    fake_zstd = fake_bin / "zstd"
    fake_zstd.write_text("#!/bin/sh\ncat > /dev/null\nprintf partial\necho boom >&2\nexit 1\n")
    fake_zstd.chmod(0o755)
    broken = start_sandbox("broken", extra_path=fake_bin)
    broken.client.write_file("a.txt", "a")
    request = urllib.request.Request(  # noqa: S310 - a local http URL
        broken.endpoint + "/snapshot", data=b"", method="POST",
        headers={"Authorization": f"Bearer {broken.token}"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310
        snapshot_id = response.headers["X-Snapshot-Id"]
        with pytest.raises(IncompleteRead):
            response.read()
    manifest = broken.client.snapshot_manifest(snapshot_id)
    assert "zstd exited with 1: boom" in (manifest.error or "")
    assert manifest.sha256 is None
    with pytest.raises(SandboxError, match="stream broke"):
        broken.client.snapshot_to(io.BytesIO())
    with expect_error(404, "not_found"):
        broken.client.snapshot_manifest("snap-unknown")


def test_sync(client: SandboxClient) -> None:
    assert client.sync() == Synced(ok=True)


def test_logs_are_json_lines(sandbox: RunningSandbox, client: SandboxClient) -> None:
    client.health()
    expected = {"event": "request", "path": "/health", "status": 200}.items()
    for _ in range(40):  # the line is written just after the answer
        records = [json.loads(line) for line in sandbox.log_path.read_text().splitlines()]
        if any(expected <= record.items() for record in records):
            return
        time.sleep(0.05)
    pytest.fail(f"no request line in {records}")
