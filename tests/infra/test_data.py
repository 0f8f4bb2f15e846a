"""Data: the table matches the store's PynamoDB models; the buckets are private and TLS-only."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match
from openagents.store import items

from tests.infra.conftest import Synth

LIST_FIELDS = set(items.LIST_FIELDS)


def _table(synth: Synth) -> dict[str, Any]:
    return synth.one("AWS::DynamoDB::Table")[1]


def test_table_keys_and_indexes_match_the_store(dev: Synth) -> None:
    props = _table(dev)["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == [
        {"AttributeName": name, "AttributeType": "S"}
        for name in ("createdKey", "pk", "sk", "userId", "userStatus")
    ]
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"byUser", "byUserStatus"}
    for name, hash_key in (("byUser", "userId"), ("byUserStatus", "userStatus")):
        index = indexes[name]
        assert index["KeySchema"] == [
            {"AttributeName": hash_key, "KeyType": "HASH"},
            {"AttributeName": "createdKey", "KeyType": "RANGE"},
        ]
        projection = index["Projection"]
        assert projection["ProjectionType"] == "INCLUDE"
        # key attributes are always projected; together they make exactly LIST_FIELDS
        keys = {"pk", "sk", hash_key, "createdKey"}
        assert set(projection["NonKeyAttributes"]) == LIST_FIELDS - keys
        assert set(projection["NonKeyAttributes"]) | (keys & LIST_FIELDS) == LIST_FIELDS


def test_table_is_on_demand_recoverable_encrypted_with_ttl(dev: Synth) -> None:
    dev.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": items.TTL_ATTRIBUTE, "Enabled": True},
            "SSESpecification": {"SSEEnabled": True},
            "DeletionProtectionEnabled": False,
        },
    )
    assert _table(dev)["DeletionPolicy"] == "Delete"


def test_prod_table_is_retained_and_protected(prod: Synth) -> None:
    table = _table(prod)
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    for bucket in prod.resources("AWS::S3::Bucket").values():
        assert bucket["DeletionPolicy"] == "Retain"


def test_every_bucket_is_private_encrypted_and_tls_only(dev: Synth) -> None:
    buckets = dev.resources("AWS::S3::Bucket")
    assert len(buckets) == 3  # access logs, artifacts, web
    for props in (b["Properties"] for b in buckets.values()):
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
    policies = {
        p["Properties"]["Bucket"]["Ref"]: p["Properties"]["PolicyDocument"]["Statement"]
        for p in dev.resources("AWS::S3::BucketPolicy").values()
    }
    assert set(policies) == set(buckets)
    for statements in policies.values():
        tls = [
            s
            for s in statements
            if s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert tls
        assert tls[0]["Effect"] == "Deny"
        assert tls[0]["Action"] == "s3:*"
        assert tls[0]["Principal"] == {"AWS": "*"}
        assert all(s["Principal"] != "*" or s["Effect"] == "Deny" for s in statements)


def test_artifact_bucket_versioning_logging_and_lifecycle(dev: Synth) -> None:
    artifacts = dev.logical_id(dev.stack.data.artifacts)
    props = dev.data["Resources"][artifacts]["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    assert props["LoggingConfiguration"]["LogFilePrefix"] == "s3/artifacts/"
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }
    messages = rules["messages-noncurrent"]
    assert messages["Prefix"] == "messages/"
    assert messages["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert rules["bundles-archive"]["Prefix"] == "bundles/"
    assert [t["StorageClass"] for t in rules["bundles-archive"]["Transitions"]] == [
        "STANDARD_IA",
        "GLACIER_IR",
    ]
    assert rules["snapshots-noncurrent"]["Prefix"] == "snapshots/"
    assert rules["snapshots-noncurrent"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    assert all(r["Status"] == "Enabled" for r in rules.values())


def test_event_bus_exists(dev: Synth) -> None:
    dev.template.resource_count_is("AWS::Events::EventBus", 1)
    dev.template.has_output("EventBusName", {"Value": Match.any_value()})
