"""The agent routes in AWS mode (the Lambda transport, the DynamoDB run store on moto): no
agent function configured is a clear 503 with nothing half-written."""

from __future__ import annotations

import boto3
import pytest
from openagents.settings import Settings

from tests.support import LambdaApi


@pytest.fixture
def aws_api(settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> LambdaApi:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    return LambdaApi(settings.model_copy(update={"artifact_bucket": bucket}))


def test_agent_routes_on_dynamodb(aws_api: LambdaApi) -> None:
    created = aws_api.post("/api/sessions", {"title": "aws"})
    assert created.status == 201, created.body
    session_id, chat_id = created.body["session"]["id"], created.body["chat"]["id"]
    models = aws_api.get("/api/models").body
    assert models["models"] == []
    assert models["defaultModelId"] is None
    assert "OPENAGENTS_MODELS" in models["message"]
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    turn = {"sessionId": session_id, "chatId": chat_id, "message": message}
    no_model = aws_api.post("/api/chat", turn)
    assert no_model.status == 400
    assert no_model.error["code"] == "model_unavailable"
    assert "OPENAGENTS_MODELS" in no_model.error["error"]
    assert aws_api.get(f"/api/chat/{chat_id}/stream").status == 204
    assert aws_api.get(f"/api/sessions/{session_id}/runs").body == {"runs": [], "nextCursor": None}
    assert aws_api.post(f"/api/chat/{chat_id}/stop").body["success"] is True
    assert aws_api.get(f"/api/sessions/{session_id}/runs", user="bob").status == 404


def test_no_agent_function_is_a_503(aws_api: LambdaApi, monkeypatch: pytest.MonkeyPatch) -> None:
    api = LambdaApi(
        aws_api.settings.model_copy(update={"models": ("bedrock/amazon.nova-pro-v1:0",)})
    )
    created = api.post("/api/sessions", {"title": "aws"})
    session_id, chat_id = created.body["session"]["id"], created.body["chat"]["id"]
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    refused = api.post(
        "/api/chat", {"sessionId": session_id, "chatId": chat_id, "message": message}
    )
    assert refused.status == 503
    assert "OPENAGENTS_AGENT_FUNCTION_ARN" in refused.error["error"]
    assert api.get(f"/api/sessions/{session_id}/runs").body["runs"] == []
