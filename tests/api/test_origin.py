"""Behind CloudFront, the API refuses requests without the origin secret header (AWS mode)."""

from __future__ import annotations

import boto3
import pytest
from openagents.settings import Settings

from tests.support import LambdaApi


@pytest.fixture
def guarded(settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> LambdaApi:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    secrets = boto3.client("secretsmanager", region_name=settings.region)
    arn = secrets.create_secret(Name=f"origin-{settings.table_name}", SecretString="s3cr3t")["ARN"]
    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    return LambdaApi(
        settings.model_copy(update={"origin_secret_arn": arn, "artifact_bucket": bucket})
    )


def test_requests_without_cloudfronts_header_are_refused(guarded: LambdaApi) -> None:
    assert guarded.get("/api/sessions").status == 403
    wrong = guarded.get("/api/sessions", headers={"x-openagents-origin-verify": "guess"})
    assert wrong.status == 403
    assert wrong.error["code"] == "access_denied"
    right = guarded.get("/api/sessions", headers={"x-openagents-origin-verify": "s3cr3t"})
    assert right.status == 200
