"""What the sandbox tools tell a caller: sandboxd's own message with host paths replaced, and
opaque snapshot ids — never a sandboxd route, a host path or the snapshot store's id."""

from __future__ import annotations

from datetime import UTC, datetime

from openagents.domain.lifecycle import FAILURE_TEXT, Failure, failure, snapshot_ref
from openagents.domain.models import Session
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
    local = "20261201T120000-abc.tar.zst"
    ebs = "snap-0123456789abcdef0"
    assert snapshot_ref(local) == snapshot_ref("".join(local))
    assert snapshot_ref(local) != snapshot_ref(ebs)
    for snapshot_id in (local, ebs):
        ref = snapshot_ref(snapshot_id)
        assert ref.startswith("snap_")
        assert len(ref) == 29
        assert snapshot_id not in ref


def test_every_lifecycle_failure_is_a_plain_sentence_with_its_code() -> None:
    for code in Failure:
        fields = failure(code)
        assert fields["lifecycle_error_code"] == code.value
        text = fields["lifecycle_error"]
        assert text == FAILURE_TEXT[code]
        assert text.endswith(".")
        for internal in ("status code", "/", "(", "Error"):  # no HTTP status, path, exception
            assert internal not in text, (code, text)


def test_clearing_the_error_clears_its_code() -> None:
    now = datetime.now(UTC)
    failed = Session(
        id="s",
        user_id="u",
        title="t",
        created_at=now,
        updated_at=now,
        **failure(Failure.SANDBOX_LOST),
    )
    assert failed.lifecycle_error_code == "sandbox_lost"
    cleared = failed.model_copy(update={"lifecycle_error": None})  # as a transition writes it
    assert Session.model_validate_json(cleared.model_dump_json()).lifecycle_error_code is None
    assert Session.model_validate(cleared.model_dump()).lifecycle_error_code is None
