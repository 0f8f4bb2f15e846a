"""How much a sandbox's pack would inflate to, measured before anything inflates it.

A pack is a sandbox's word: each entry's header declares its size, and a zlib stream or a delta
(whose copy instructions may repeat a base many times) can turn a few kilobytes into gigabytes.
dulwich holds each object it reads in memory, so a bomb would exhaust the control plane before
any check ran. ``check_inflation`` walks the entries with bounded, discarding decompression —
only a delta's first bytes (its source and target sizes) are kept — and refuses a pack whose
objects, or whose total, exceed the caps.
"""

from __future__ import annotations

import struct
import zlib

from openagents.git import GitHostError

OFS_DELTA, REF_DELTA = 6, 7
FEED_BYTES = 1 << 16
DELTA_HEADER_BYTES = 20  # two size varints


def check_inflation(pack: bytes | memoryview, *, max_object: int, max_total: int) -> None:
    """Refuse (413) a pack with an object over ``max_object`` bytes, inflated or as a delta's
    result, or inflating to over ``max_total`` bytes in all; 400 for a pack that is not one."""
    view = memoryview(pack)
    if len(view) < 32 or bytes(view[:4]) != b"PACK":
        raise _refused("not a pack", 400)
    (count,) = struct.unpack(">I", view[8:12])
    position, total = 12, 0
    for _ in range(count):
        kind, size, position = _entry_header(view, position)
        if kind == OFS_DELTA:
            position = _skip_offset(view, position)
        elif kind == REF_DELTA:
            position += 20
        if size > max_object:
            raise _refused(f"an object would inflate to {size} bytes (at most {max_object})")
        total += size
        position, head = _inflate(view, position, size)
        if kind in (OFS_DELTA, REF_DELTA):
            target = _delta_target(head)
            if target > max_object:
                raise _refused(f"a delta would build {target} bytes (at most {max_object})")
            total += target
        if total > max_total:
            raise _refused(f"the pack would inflate to more than {max_total} bytes")


def _entry_header(view: memoryview, position: int) -> tuple[int, int, int]:
    """(type, declared size, position after the header)."""
    byte = _byte(view, position)
    kind, size, shift = (byte >> 4) & 7, byte & 15, 4
    position += 1
    while byte & 0x80:
        byte = _byte(view, position)
        size |= (byte & 0x7F) << shift
        shift += 7
        position += 1
        if shift > 70:
            raise _refused("an entry's size does not end", 400)
    return kind, size, position


def _skip_offset(view: memoryview, position: int) -> int:
    for _ in range(10):
        byte = _byte(view, position)
        position += 1
        if not byte & 0x80:
            return position
    raise _refused("a delta's base offset does not end", 400)


def _inflate(view: memoryview, position: int, declared: int) -> tuple[int, bytes]:
    """Decompress one entry's zlib stream without keeping it (past its first bytes), refusing
    more than ``declared`` bytes; returns where the next entry starts and the first bytes."""
    stream = zlib.decompressobj()
    head = b""
    produced = 0
    fed = position
    while not stream.eof:
        if fed >= len(view):
            raise _refused("an entry's data is cut short", 400)
        chunk: bytes | memoryview = view[fed : fed + FEED_BYTES]
        fed += len(chunk)
        while chunk and not stream.eof:
            try:
                out = stream.decompress(chunk, FEED_BYTES)
            except zlib.error as exc:
                raise _refused(f"an entry's data is not zlib: {exc}", 400) from None
            produced += len(out)
            if produced > declared:
                raise _refused("an entry inflates past its declared size", 400)
            if len(head) < DELTA_HEADER_BYTES:
                head += out[: DELTA_HEADER_BYTES - len(head)]
            chunk = stream.unconsumed_tail
    if produced != declared:
        raise _refused("an entry inflates short of its declared size", 400)
    return fed - len(stream.unused_data), head


def _delta_target(head: bytes) -> int:
    """A delta's result size: its second size varint (the first is its base's size)."""
    position = 0
    value = 0
    for _ in range(2):
        value, shift = 0, 0
        while True:
            if position >= len(head) or shift > 63:
                raise _refused("a delta's header is malformed", 400)
            byte = head[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
    return value


def _byte(view: memoryview, position: int) -> int:
    if position >= len(view):
        raise _refused("an entry is cut short", 400)
    return view[position]


def _refused(why: str, status: int = 413) -> GitHostError:
    return GitHostError(f"The bundle does not verify: {why}", status=status)
