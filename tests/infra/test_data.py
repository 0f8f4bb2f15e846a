"""Data: the table matches the store's PynamoDB models; the buckets are private and TLS-only."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match
from openagents.store import items, shared

from tests.infra.conftest import Synth

LIST_FIELDS = set(shared.LIST_FIELDS)


def _table(synth: Synth) -> dict[str, Any]:
    return synth.one("AWS::DynamoDB::Table")[1]


def test_table_keys_and_indexes_match_the_store(dev: Synth) -> None:
    props = _table(dev)["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    # Given the store's own table definition (what items.create_table makes on one machine)
    schema: Any = items.SessionItem._get_schema()
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        schema["attribute_definitions"], key=lambda a: a["AttributeName"]
    )
    model_indexes = {i["index_name"]: i for i in schema["global_secondary_indexes"]}
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    # Then every index is there, with the model's keys and projection type
    assert set(indexes) == set(model_indexes)
    for name, model in model_indexes.items():
        hash_first = sorted(model["key_schema"], key=lambda k: k["KeyType"] != "HASH")
        assert indexes[name]["KeySchema"] == hash_first, name
        projection = indexes[name]["Projection"]
        assert projection["ProjectionType"] == model["projection"]["ProjectionType"], name
        keys = {k["AttributeName"] for k in model["key_schema"]} | {"pk", "sk"}
        wanted = set(model["projection"].get("NonKeyAttributes", [])) - keys
        assert set(projection.get("NonKeyAttributes", [])) == wanted, name
    # ... and the session lists project exactly the list fields (key attributes always are)
    for name, hash_key in (("byUser", "userId"), ("byUserStatus", "userStatus")):
        keys = {"pk", "sk", hash_key, "createdKey"}
        projected = set(indexes[name]["Projection"]["NonKeyAttributes"])
        assert projected == LIST_FIELDS - keys
        assert projected | (keys & LIST_FIELDS) == LIST_FIELDS
    # ... and the reconciler's sparse index carries keys only (it reads each session it finds)
    assert indexes["overdue"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}


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
