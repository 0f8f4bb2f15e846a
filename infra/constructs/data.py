"""Data: the single table (keys and indexes taken from the store's PynamoDB models, so the two
cannot drift) and the artifact bucket (large message bodies, git bundles, workspace snapshots)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct
from openagents.store import items

from infra.config import StageConfig
from infra.constructs.buckets import private_bucket
from infra.constructs.function import removal

# Artifact bucket prefixes: the contract with the code that writes them.
MESSAGES_PREFIX = "messages/"  # message bodies over the item limit (openagents.store.dynamodb)
BUNDLES_PREFIX = "bundles/"  # git bundles saved when a session is archived
DIFFS_PREFIX = "diffs/"  # the sessions' cached diffs (openagents.services.sandbox_tools)
ATTACHMENTS_PREFIX = "attachments/"  # files in user messages (openagents.services.attachments)
SNAPSHOTS_PREFIX = "snapshots/"  # EFS workspace snapshots (tar.zst) of hibernated sessions


@dataclass(frozen=True)
class IndexSpec:
    name: str
    partition_key: str
    sort_key: str | None
    projection: str  # INCLUDE, KEYS_ONLY or ALL
    non_key_attributes: tuple[str, ...]


def _types(definitions: list[dict[str, str]]) -> dict[str, str]:
    return {d["AttributeName"]: d["AttributeType"] for d in definitions}


def _key(schema: list[dict[str, str]], kind: str) -> str | None:
    return next((k["AttributeName"] for k in schema if k["KeyType"] == kind), None)


def table_schema() -> tuple[str, str, list[IndexSpec], dict[str, str]]:
    """(pk, sk, indexes, attribute types) from the models ``items.create_table`` uses locally.

    Key attributes are always projected into an index, so the INCLUDE lists leave out the
    table's and the index's own keys (the projected set is the same).
    """
    schema: Any = items.SessionItem._get_schema()
    pk = _key(schema["key_schema"], "HASH")
    sk = _key(schema["key_schema"], "RANGE")
    if pk is None or sk is None:
        raise ValueError("the store's table needs a hash and a range key")
    indexes = []
    for index in schema["global_secondary_indexes"]:
        hash_key = _key(index["key_schema"], "HASH")
        range_key = _key(index["key_schema"], "RANGE")
        projection = index["projection"]["ProjectionType"]
        if hash_key is None or projection not in ("INCLUDE", "KEYS_ONLY", "ALL"):
            raise ValueError(f"{index['index_name']}: expected a hash key and a projection")
        keys = {pk, sk, hash_key, range_key}
        indexes.append(
            IndexSpec(
                name=index["index_name"],
                partition_key=hash_key,
                sort_key=range_key,
                projection=projection,
                non_key_attributes=tuple(
                    a for a in index["projection"].get("NonKeyAttributes", []) if a not in keys
                ),
            )
        )
    return pk, sk, indexes, _types(schema["attribute_definitions"])


def _attribute(name: str, types: dict[str, str]) -> dynamodb.Attribute:
    kinds = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}
    return dynamodb.Attribute(name=name, type=kinds[types[name]])


class Data(Construct):
    def __init__(
        self, scope: Construct, id: str, *, config: StageConfig, access_logs: s3.IBucket
    ) -> None:
        super().__init__(scope, id)
        self.indexes: list[IndexSpec] = []
        self.table = self._build_table(config)
        self.artifacts = self._build_artifact_bucket(config, access_logs)

    def index_arn(self, name: str) -> str:
        if name not in {index.name for index in self.indexes}:
            raise ValueError(f"the table has no index {name!r}")
        return f"{self.table.table_arn}/index/{name}"

    @property
    def environment(self) -> dict[str, str]:
        """The settings every control-plane function needs to reach the data."""
        return {
            "OPENAGENTS_TABLE_NAME": self.table.table_name,
            "OPENAGENTS_ARTIFACT_BUCKET": self.artifacts.bucket_name,
        }

    def _build_table(self, config: StageConfig) -> dynamodb.Table:
        pk, sk, indexes, types = table_schema()
        table = dynamodb.Table(
            self,
            "Table",
            partition_key=_attribute(pk, types),
            sort_key=_attribute(sk, types),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=items.TTL_ATTRIBUTE,
            stream=dynamodb.StreamViewType.NEW_IMAGE,  # the events outbox (constructs/outbox.py)
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.prod,
            removal_policy=removal(config),
        )
        for spec in indexes:
            table.add_global_secondary_index(
                index_name=spec.name,
                partition_key=_attribute(spec.partition_key, types),
                sort_key=_attribute(spec.sort_key, types) if spec.sort_key else None,
                projection_type=dynamodb.ProjectionType(spec.projection),
                non_key_attributes=list(spec.non_key_attributes) or None,
            )
        self.indexes = indexes
        return table

    def _build_artifact_bucket(self, config: StageConfig, access_logs: s3.IBucket) -> s3.Bucket:
        noncurrent = Duration.days(90 if config.prod else 30)
        return private_bucket(
            self,
            "Artifacts",
            config=config,
            access_logs=access_logs,
            log_prefix="s3/artifacts/",
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="messages-noncurrent",
                    prefix=MESSAGES_PREFIX,
                    noncurrent_version_expiration=noncurrent,
                    expired_object_delete_marker=True,
                ),
                s3.LifecycleRule(
                    id="bundles-archive",
                    prefix=BUNDLES_PREFIX,
                    transitions=[
                        s3.Transition(
                            storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                            transition_after=Duration.days(30),
                        ),
                        s3.Transition(
                            storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                            transition_after=Duration.days(90),
                        ),
                    ],
                    noncurrent_version_expiration=noncurrent,
                    expired_object_delete_marker=True,
                ),
                s3.LifecycleRule(
                    # snapshots are large and replaced on every hibernate: keep no old copies
                    id="snapshots-noncurrent",
                    prefix=SNAPSHOTS_PREFIX,
                    noncurrent_version_expiration=Duration.days(1),
                    expired_object_delete_marker=True,
                ),
            ],
        )
