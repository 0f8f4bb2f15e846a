"""A long turn's message writes (issue 22): what each step of an N-step turn writes to store its
assistant message, whole (every step rewrites the message: the store as it was) against as a
segment (the step's parts from the first it changed: the store now), in the same run on the
SQLite store the one-machine runtime uses, with the artifact store beside it (a body past the
inline limit goes there).

Each step adds a model call's tool part (``input-available``, ~``part_kb`` KB of input) and
then finishes it (``output-available``): two writes, as the model step and the tool step make
them. Measured per write: the bytes the process handed to ``write(2)`` (``/proc/self/io``'s
``wchar``: the WAL's pages and the artifact files), and the wall time; and what the message
reads back as at the end (it must be equal)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import ms, say, scratch, summary


def _written() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("no wchar in /proc/self/io")


def _turn(home: Path, steps: int, part_kb: int, segmented: bool) -> dict[str, Any]:
    from openagents.artifacts.folder import FolderArtifactStore
    from openagents.domain.models import Message, Role
    from openagents.store.runs import JsonValue, Progress, Run, RunUsage, TurnMessage
    from openagents.store.runs_sqlite import SqliteRunStore
    from openagents.store.sqlite import SqliteStore

    from tests.contract.helpers import create

    store = SqliteStore(home / "openagents.db", FolderArtifactStore(home / "artifacts"), 300_000)
    try:
        runs = SqliteRunStore(store)
        session = create(store)
        chat_id = next(iter(session.chats))
        run = Run(
            id="run-1",
            session_id=session.id,
            chat_id=chat_id,
            user_id=session.user_id,
            message_id="u-1",
            assistant_message_id="a-1",
            model_id="scripted/default",
            started_at=datetime.now(UTC),
        )
        runs.start(run)
        at = datetime.now(UTC) + timedelta(milliseconds=1)
        parts: list[JsonValue] = []
        written: list[float] = []
        took: list[float] = []
        filler = "x" * (part_kb * 1024)

        def write(kept: int, seq: int) -> None:
            body: dict[str, JsonValue] = {"id": "a-1", "role": "assistant", "parts": list(parts)}
            message = Message(
                id="a-1", chat_id=chat_id, role=Role.ASSISTANT, parts=body, created_at=at
            )
            chat = store.get_chat(session.id, chat_id)
            assert chat is not None
            turn = TurnMessage(session, chat, message, None, kept if segmented else 0)
            before, started = _written(), time.perf_counter()
            runs.append(run.id, [{"type": "start-step"}], Progress(seq, seq, RunUsage()), turn)
            took.append(time.perf_counter() - started)
            written.append(_written() - before)

        for step in range(1, steps + 1):
            call: dict[str, JsonValue] = {
                "type": "tool-bash",
                "toolCallId": f"call-{step}",
                "state": "input-available",
                "input": {"command": f"echo {step}", "note": filler},
            }
            parts.append(call)
            write(len(parts) - 1, 2 * step - 1)
            parts[-1] = {**call, "state": "output-available", "output": {"stdout": str(step)}}
            write(len(parts) - 1, 2 * step)
        (message,) = store.list_messages(session.id, chat_id, 10, None).items
        if message.parts["parts"] != parts:
            raise RuntimeError("the message read back is not the one written")
        last = written[-20:]
        return {
            "writes": len(written),
            "bytesPerWrite": summary([float(b) for b in written]),
            "lastWritesKiB": round(sum(last) / len(last) / 1024, 1),
            "totalMiB": round(sum(written) / 2**20, 1),
            "writeMs": summary([ms(t) for t in took]),
            "messageKiB": round(len(str(parts)) / 1024, 1),
        }
    finally:
        store.db.close()


def run(args: Any) -> dict[str, Any]:
    steps = 100 if args.quick else 250
    part_kb = 20
    with scratch("messages") as home:
        say(f"messages: {steps} steps, whole writes")
        (home / "whole").mkdir()
        whole = _turn(home / "whole", steps, part_kb, segmented=False)
        say(f"messages: {steps} steps, segments")
        (home / "segments").mkdir()
        segments = _turn(home / "segments", steps, part_kb, segmented=True)
    return {
        "steps": steps,
        "partKiB": part_kb,
        "whole": whole,
        "segments": segments,
        "bytesRatio": round(segments["totalMiB"] / whole["totalMiB"], 4),
        "timeRatio": round(segments["writeMs"]["p50"] / whole["writeMs"]["p50"], 3),
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    found = []
    for key, label in (
        ("whole", "whole message per write (before)"),
        ("segments", "segments (now)"),
    ):
        r = result[key]
        found.append(
            [
                f"messages: {result['steps']}-step turn, {label}",
                f"{r['lastWritesKiB']} KiB/write",
                f"last 20 writes' mean; {r['totalMiB']} MiB over {r['writes']} writes; "
                f"write p50 {r['writeMs']['p50']} ms, p99 {r['writeMs']['p99']} ms; "
                f"message {r['messageKiB']} KiB",
            ]
        )
    found.append(
        [
            "messages: segments vs whole",
            f"{result['bytesRatio']}x bytes",
            f"write time p50 {result['timeRatio']}x",
        ]
    )
    return found
