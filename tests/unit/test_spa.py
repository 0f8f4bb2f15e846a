"""The local server's web app mount: client routes get index.html; a path under /api that no
route matched is the API's JSON 404 (every method), never the app's HTML."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from openagents.local.spa import mount_spa
from openagents.settings import Settings

from functions.api.app import create_app


def test_unmatched_api_paths_are_json_404_and_client_routes_get_the_app(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<html>app</html>")
    app = create_app(lambda: Settings(home=tmp_path / "home"))
    assert mount_spa(app, dist)
    client = TestClient(app, base_url="http://127.0.0.1:8000")

    for method in ("GET", "POST", "PUT", "DELETE"):
        for path in ("/api/nope", "/api/sessions/x/nope", "/api"):
            reply = client.request(method, path)
            assert reply.status_code == 404, (method, path, reply.text)
            assert reply.json() == {"error": "Not Found", "code": "not_found", "field": None}
    for path in ("/", "/sessions/abc", "/apiary"):
        reply = client.get(path)
        assert reply.status_code == 200, path
        assert reply.text == "<html>app</html>"
