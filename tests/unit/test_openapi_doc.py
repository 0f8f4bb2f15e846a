"""docs/openapi.json is the schema the app serves (regenerate: `openagents openapi`)."""

import json
from pathlib import Path

from openagents.settings import Settings

from functions.api.app import create_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_committed_schema_matches_the_app() -> None:
    served = create_app(Settings).openapi()
    assert json.loads(DOC.read_text()) == json.loads(json.dumps(served)), (
        "docs/openapi.json is stale: run `.venv/bin/openagents openapi > docs/openapi.json`"
    )


PUBLIC = frozenset(
    {
        "/api/health",
        "/api/github/webhook",  # HMAC-signed
        "/api/shared/{share_id}",  # a share link: its unguessable id is the credential
        "/api/shared/{share_id}/markdown",
        "/api/shared/{share_id}/status",
    }
)


def test_every_route_but_health_the_webhook_and_share_links_requires_a_bearer_token() -> None:
    schema = create_app(Settings).openapi()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            secured = bool(operation.get("security"))
            assert secured == (path not in PUBLIC), f"{method.upper()} {path}"
