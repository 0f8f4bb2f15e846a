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


def _refs(node: object) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node))
    return set()


def test_every_reference_names_a_schema_of_the_components() -> None:
    """Error responses name ``ErrorOut`` by reference (``schemas.error_responses``): the schema
    must still be among the components."""
    schema = create_app(Settings).openapi()
    components = schema["components"]["schemas"]
    refs = _refs(schema["paths"])
    assert "#/components/schemas/ErrorOut" in refs
    assert {
        ref for ref in refs if ref.removeprefix("#/components/schemas/") not in components
    } == set()
