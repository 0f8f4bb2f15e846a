"""A sandbox's pack is measured before anything inflates it: bombs (a zlib stream of zeros, a
delta that builds gigabytes, a header that lies) are refused by their sizes, real packs pass."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from openagents.git import GitHostError
from openagents.git.pack_guard import check_inflation
from openagents.git.smart_http import read_push_bundle

MIB = 1 << 20


def header(kind: int, size: int) -> bytes:
    first = (kind << 4) | (size & 15)
    size >>= 4
    out = bytearray()
    while True:
        if size:
            out.append(first | 0x80)
            first = size & 0x7F
            size >>= 7
        else:
            out.append(first)
            return bytes(out)


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def pack(*entries: bytes) -> bytes:
    body = b"PACK" + struct.pack(">II", 2, len(entries)) + b"".join(entries)
    return body + hashlib.sha1(body, usedforsecurity=False).digest()


def blob(data: bytes, declared: int | None = None) -> bytes:
    return header(3, len(data) if declared is None else declared) + zlib.compress(data)


def zeros_stream(size: int) -> bytes:
    squeeze = zlib.compressobj(9)
    chunk = bytes(MIB)
    parts = [squeeze.compress(chunk) for _ in range(size // MIB)]
    return b"".join(parts) + squeeze.flush()


def git_pack(tmp_path: Path) -> bytes:
    """A real pack: a repository's whole history as ``git bundle`` writes it."""
    repo = tmp_path / "repo"
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for i in range(3):  # one file growing: git stores its older versions as deltas
        (repo / "f.txt").write_text("".join(f"line {n}\n" for n in range(300 * (i + 1))))
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), *env, "commit", "-qm", f"c{i}"], check=True)
    bundle = tmp_path / "b.bundle"
    subprocess.run(
        ["git", "-C", str(repo), "bundle", "create", "-q", str(bundle), "main"], check=True
    )
    data = bundle.read_bytes()
    return data[data.index(b"\n\n") + 2 :]


def refused(data: bytes, **caps: int) -> GitHostError:
    with pytest.raises(GitHostError) as caught:
        check_inflation(data, **({"max_object": 128 * MIB, "max_total": 2 << 30} | caps))
    return caught.value


def test_a_real_pack_passes(tmp_path: Path) -> None:
    check_inflation(git_pack(tmp_path), max_object=128 * MIB, max_total=2 << 30)


def test_a_declared_gigabyte_is_refused_before_inflating() -> None:
    bomb = pack(header(3, 1 << 30) + zeros_stream(4 * MIB))  # would inflate to 1 GiB
    error = refused(bomb)
    assert (error.status, "would inflate to 1073741824 bytes" in error.message) == (413, True)


def test_a_stream_that_inflates_past_its_header_is_refused() -> None:
    lying = pack(header(3, 10) + zeros_stream(64 * MIB))  # says 10 bytes, holds 64 MiB
    error = refused(lying)
    assert error.status == 400
    assert "inflates past its declared size" in error.message


def test_a_delta_that_builds_a_gigabyte_is_refused() -> None:
    base = blob(b"x" * 1000)
    copy_all = bytes([0x80 | 0x10 | 0x20, 0xE8, 0x03])  # copy 1000 bytes from offset 0
    delta = varint(1000) + varint(1 << 30) + copy_all * 64
    offset_back = varint(len(base))  # small enough for one byte: the same encoding
    entry = header(6, len(delta)) + offset_back + zlib.compress(delta)
    error = refused(pack(base, entry))
    assert error.status == 413
    assert "a delta would build 1073741824 bytes" in error.message


def test_the_total_is_capped(tmp_path: Path) -> None:
    error = refused(git_pack(tmp_path), max_object=10_000, max_total=1_000)
    assert error.status == 413
    assert "would inflate to more than 1000 bytes" in error.message


@pytest.mark.parametrize(
    "broken",
    [b"PACK" + struct.pack(">II", 2, 1), b"NOTAPACK" + bytes(30), pack(blob(b"abc")[:-4])],
)
def test_a_broken_pack_is_a_bad_request(broken: bytes) -> None:
    assert refused(broken).status == 400


def test_a_sandboxs_bomb_bundle_is_refused_by_the_push() -> None:
    bomb = pack(header(3, 1 << 30) + zeros_stream(MIB))
    bundle = b"# v2 git bundle\n" + b"a" * 40 + b" refs/heads/feature\n\n" + bomb
    with pytest.raises(GitHostError) as caught:
        read_push_bundle(bundle, "refs/heads/feature")
    assert caught.value.status == 413
