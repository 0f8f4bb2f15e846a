"""Bucket defaults, defined once: private, SSE-S3, TLS-only, owner-enforced, access-logged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.function import removal


def private_bucket(
    scope: Construct,
    id: str,
    *,
    config: StageConfig,
    access_logs: s3.IBucket | None,
    log_prefix: str = "",
    lifecycle_rules: Sequence[s3.LifecycleRule] = (),
    **extra: Any,
) -> s3.Bucket:
    return s3.Bucket(
        scope,
        id,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        object_ownership=extra.pop("object_ownership", s3.ObjectOwnership.BUCKET_OWNER_ENFORCED),
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=log_prefix or None,
        lifecycle_rules=list(lifecycle_rules),
        removal_policy=removal(config),
        **extra,
    )


class AccessLogs(Construct):
    """Where S3 server access logs and CloudFront standard logs land."""

    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.bucket = private_bucket(
            self,
            "Bucket",
            config=config,
            access_logs=None,
            # CloudFront standard logging writes with an ACL: it needs ACLs enabled
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-logs",
                    expiration=Duration.days(365 if config.prod else 90),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
        )
