"""Every API test runs twice: through the Lambda handler (AWS mode: the DynamoDB adapter on
moto) and over HTTP against a local server (local mode: the SQLite store)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from openagents.settings import Settings

from tests.support import Api, HttpApi, LambdaApi, local_server


@pytest.fixture(params=["lambda", "http"])
def api(
    request: pytest.FixtureRequest,
    settings: Settings,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Api]:
    if request.param == "lambda":
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)  # boto3 honours it
        bucket = f"artifacts-{settings.table_name}"
        boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
        yield LambdaApi(settings.model_copy(update={"artifact_bucket": bucket}))
        return
    with local_server(settings) as base_url:
        client = HttpApi(settings, base_url)
        yield client
        client.client.close()


@pytest.fixture
def http_api(settings: Settings) -> Iterator[HttpApi]:
    """Local-mode only (tokens, User-Agent bot policy)."""
    with local_server(settings) as base_url:
        client = HttpApi(settings, base_url)
        yield client
        client.client.close()
