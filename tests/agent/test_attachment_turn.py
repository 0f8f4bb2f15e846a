"""An image and a text file in a user message reach the model (issue 25): uploaded, sent as
file parts, read from the artifact store at the model step; the scripted model's requestLog
shows the blocks it received, and the stored message keeps the reference, not the bytes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.agent.conftest import AgentApi

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(64)


def upload(api: AgentApi, sid: str, data: bytes, media: str, name: str) -> dict[str, Any]:
    reply = api.request(
        "POST",
        f"/api/sessions/{sid}/attachments",
        raw_body=data,
        query={"filename": name},
        headers={"content-type": media},
    )
    assert reply.status == 201, reply.body
    body: dict[str, Any] = reply.body
    return body


def test_an_image_and_a_text_file_reach_the_model(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    log = agent_api.script.path.parent / "requests.jsonl"
    agent_api.script.path.write_text(
        json.dumps({"responses": [{"text": "A chart."}], "requestLog": log.name})
    )
    image = upload(agent_api, session_id, PNG, "image/png", "chart.png")
    notes = upload(agent_api, session_id, b"ship it\n", "text/markdown", "notes.md")
    parts = [
        {"type": "text", "text": "what is this?"},
        {"type": "file", "mediaType": "image/png", "filename": "chart.png", "url": image["url"]},
        {"type": "file", "mediaType": "text/markdown", "filename": "notes.md", "url": notes["url"]},
    ]
    message = {"id": "m-attach", "role": "user", "parts": parts}
    started = agent_api.post(
        "/api/chat", {"sessionId": session_id, "chatId": chat_id, "message": message}
    )
    assert started.status == 202, started.body
    agent_api.events(chat_id)
    turns = [json.loads(line) for line in log.read_text().splitlines()]
    [step] = [t for t in turns if t["purpose"] == "turn"]
    assert step["messages"][0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {
                "type": "image",
                "mediaType": "image/png",
                "size": len(PNG),
                "sha256": hashlib.sha256(PNG).hexdigest(),
            },
            {
                "type": "document",
                "name": "notes.md",
                "mediaType": "text/markdown",
                "text": "ship it\n",
            },
        ],
    }
    stored = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    assert stored["messages"][0]["parts"] == parts  # the reference, never the bytes
