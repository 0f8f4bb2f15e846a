"""The local sign-in endpoint exists on one machine only; the SPA is served with fallback."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from openagents.local.spa import mount_spa
from openagents.settings import Settings

from functions.api.app import create_app
from tests.support import Api


def test_local_token_signs_in_locally_and_is_absent_on_aws(api: Api) -> None:
    minted = api.post("/api/local/token", {"user": "carol", "name": "Carol Tan"}, user=None)
    if api.transport == "lambda":
        assert minted.status == 404
        return
    assert minted.status == 200
    token = minted.body["token"]
    created = api.post(
        "/api/sessions", {"title": "t"}, user=None, headers={"authorization": f"Bearer {token}"}
    )
    assert created.status == 201
    assert api.get("/api/sessions", user="carol").body["sessions"][0]["title"] == "t"
    assert api.post("/api/local/token", {"user": "a b"}, user=None).status == 422


def test_spa_is_served_with_client_route_fallback(settings: Settings, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html>app</html>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    app = create_app(lambda: settings)
    assert mount_spa(app, dist)
    client = TestClient(app, base_url="http://127.0.0.1")
    assert client.get("/assets/app.js").text == "console.log(1)"
    assert client.get("/sessions/abc/chats/def").text == "<html>app</html>"
    assert client.get("/api/health").json() == {"status": "ok"}
    assert client.get("/api/nope").status_code == 404
    assert not mount_spa(create_app(lambda: settings), tmp_path / "missing")
