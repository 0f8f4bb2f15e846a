"""What the sandbox tools tell a caller: sandboxd's own message with host paths replaced, and
opaque snapshot ids — never a sandboxd route, a host path or the snapshot store's id."""

from __future__ import annotations

from openagents.domain.lifecycle import snapshot_ref
from openagents.services.sandbox_tools import public_detail


def test_absolute_paths_are_replaced_and_relative_ones_kept() -> None:
    host = "fatal: '/root/.openagents/sandboxes/s1/2/workspace/.git' is not a repository"
    assert public_detail(host) == "fatal: '<path>' is not a repository"
    assert public_detail("no such file or directory: 'src/app.py'") == (
        "no such file or directory: 'src/app.py'"
    )
    assert public_detail("/etc/passwd and ./x and a/b") == "<path> and ./x and a/b"
    assert public_detail("a / b") == "a / b"


def test_snapshot_refs_are_opaque_and_stable() -> None:
    local = {"id": "20261201T120000-abc.tar.zst"}
    ebs = {"id": "snap-0123456789abcdef0"}
    assert snapshot_ref(local) == snapshot_ref(dict(local))
    assert snapshot_ref(local) != snapshot_ref(ebs)
    for snapshot in (local, ebs):
        ref = snapshot_ref(snapshot)
        assert ref.startswith("snap_")
        assert len(ref) == 29
        assert str(snapshot["id"]) not in ref
