"""The agent's detached ``bash`` that starts a server, in a real confined sandbox with the
scripted model: the tool result names the new port and says it is previewable (no link, no
token in the transcript), and the port is then previewed through the proxy as any other."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents.composition import Container
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.integration.test_previews import ALICE, Live, wait_listed
from tests.support import HttpApi, make_origin, provisioning_runtime, serve_app, wait_active

PORT = 8123
SCRIPT: dict[str, Any] = {
    "responses": [
        {
            "toolCalls": [
                {
                    "name": "bash",
                    "input": {
                        "command": f"python3 -m http.server {PORT} --bind 127.0.0.1",
                        "detached": True,
                    },
                }
            ]
        },
        {"text": "The server runs."},
    ]
}


@pytest.fixture
def live(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Live]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    scripted = settings.model_copy(update={"scripted_model_file": script})
    with (
        provisioning_runtime(scripted, moto_endpoint, monkeypatch) as running,
        serve_app(running) as (base, app),
    ):
        container: Container = app.state.container()
        session, _ = container.sessions.create(
            ALICE, NewSession(repo_url=str(make_origin(tmp_path)))
        )
        wait_active(container, ALICE, session.id)
        yield Live(base, HttpApi(running, base), container, session.id)


def bash_output(live: Live, chat_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        page = live.api.get(f"/api/sessions/{live.session_id}/chats/{chat_id}/messages")
        assert page.status == 200, page.body
        messages = page.body["messages"]
        done = [m for m in messages if m["role"] == "assistant"]
        parts = [p for m in done for p in m["parts"] if p.get("type") == "tool-bash"]
        texts = [p for m in done for p in m["parts"] if p.get("type") == "text"]
        if parts and texts:
            return dict(parts[0])
        time.sleep(0.1)
    raise AssertionError("the turn never ended")


def test_a_detached_server_started_by_the_agent_is_named_previewable(live: Live) -> None:
    chat_id = live.api.get(f"/api/sessions/{live.session_id}/chats").body["chats"][0]["id"]
    message = {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "serve it"}]}
    posted = live.api.post(
        "/api/chat", {"sessionId": live.session_id, "chatId": chat_id, "message": message}
    )
    assert posted.status == 202, posted.body
    part = bash_output(live, chat_id)
    output = part["output"]
    assert output["ports"] == [PORT]
    assert f"port {PORT}" in output["preview"]
    assert "previewable" in output["preview"]
    transcript = json.dumps(part)
    assert "token=" not in transcript
    assert "__preview" not in transcript
    wait_listed(live, PORT)
    made = live.api.post(f"/api/sessions/{live.session_id}/ports/{PORT}/preview", {})
    assert made.status == 200, made.body  # the card's "Open preview" asks for exactly this
