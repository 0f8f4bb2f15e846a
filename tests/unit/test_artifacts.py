"""The one-machine artifact store: files under a folder, never outside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from openagents.artifacts.folder import FolderArtifactStore


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


@pytest.fixture
def store(root: Path) -> FolderArtifactStore:
    return FolderArtifactStore(root)


def test_put_get_delete(store: FolderArtifactStore, root: Path) -> None:
    key = "messages/chat-1/msg-1/abc.json"
    store.put(key, b'{"hello": "world"}')
    assert store.get(key) == b'{"hello": "world"}'
    assert (root / key).read_bytes() == b'{"hello": "world"}'
    store.delete(key)
    assert not (root / key).exists()
    with pytest.raises(FileNotFoundError):
        store.get(key)


def test_put_overwrites_and_leaves_no_temp_files(store: FolderArtifactStore, root: Path) -> None:
    store.put("a/b.bin", b"one")
    store.put("a/b.bin", b"two" * 1000)
    assert store.get("a/b.bin") == b"two" * 1000
    assert [p.name for p in (root / "a").iterdir()] == ["b.bin"]


def test_binary_and_empty_payloads(store: FolderArtifactStore) -> None:
    data = bytes(range(256)) * 10
    store.put("bin", data)
    store.put("empty", b"")
    assert store.get("bin") == data
    assert store.get("empty") == b""


def test_delete_missing_is_a_no_op(store: FolderArtifactStore) -> None:
    store.delete("never/written.json")


def test_relative_root_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = FolderArtifactStore(Path("rel"))
    store.put("k", b"v")
    monkeypatch.chdir("/")
    assert store.get("k") == b"v"
    assert (tmp_path / "rel" / "k").read_bytes() == b"v"


def test_dot_segments_inside_the_root_are_fine(store: FolderArtifactStore, root: Path) -> None:
    store.put("a/../b", b"x")
    assert (root / "b").read_bytes() == b"x"


@pytest.mark.parametrize(
    "key",
    ["../x", "../../etc/passwd", "a/../../x", "/etc/passwd", "/tmp/x", "", ".", "a/..", "..", "./"],
)
def test_keys_escaping_the_root_are_refused(
    store: FolderArtifactStore, root: Path, tmp_path: Path, key: str
) -> None:
    for operation in (
        lambda: store.put(key, b"evil"),
        lambda: store.get(key),
        lambda: store.delete(key),
    ):
        with pytest.raises(ValueError, match="escapes"):
            operation()
    assert not (tmp_path / "x").exists()


def test_symlink_out_of_the_root_is_refused(
    store: FolderArtifactStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    root.mkdir(parents=True)
    (root / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="escapes"):
        store.get("link/secret")
    with pytest.raises(ValueError, match="escapes"):
        store.put("link/new", b"x")
    assert not (outside / "new").exists()


def test_sibling_folder_with_common_prefix_is_outside(
    store: FolderArtifactStore, tmp_path: Path
) -> None:
    (tmp_path / "artifacts-evil").mkdir()
    with pytest.raises(ValueError, match="escapes"):
        store.put("../artifacts-evil/x", b"x")
    assert not (tmp_path / "artifacts-evil" / "x").exists()
