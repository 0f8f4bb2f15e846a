"""The Fargate driver: ECS requests pinned with Stubber; EC2, EFS and S3 against moto."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from openagents.sandbox.answers import Health, Restored, SnapshotManifest, Synced
from openagents.sandbox.fargate import FargateDriver, run_task_client_token
from openagents.sandbox.fargate_efs import access_point_client_token
from openagents.sandbox.fargate_storage import FargateConfig
from openagents.sandbox.port import (
    Sandboxd,
    SandboxDriver,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
    sandbox_token,
)

from tests.sandboxd_fake import SandboxdFake

REGION = "us-east-1"
KEY = b"k" * 32
SESSION = "sess_AbC-123"
TASK_ARN = "arn:aws:ecs:us-east-1:123456789012:task/sandboxes/0123456789abcdef"
CLUSTER = "sandboxes"
BASE_DEF_ARN = "arn:aws:ecs:us-east-1:123456789012:task-definition/openagents-sandbox:7"
EBS_ROLE = "arn:aws:iam::123456789012:role/ecs-infrastructure"
NOW = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
BUCKET = "openagents-artifacts"
GIB = 1024**3
# one botocore session: service models are loaded once for the whole module
BOTO = boto3.session.Session(region_name=REGION)


def token(generation: int = 1) -> str:
    return sandbox_token(KEY, SESSION, generation)


# -- fakes and wiring -------------------------------------------------------------------------


@dataclass
class FakeSandboxd(SandboxdFake):
    """The driver's part of sandboxd; records every call in the shared event list."""

    events: list[str]
    healthy: bool = True
    payload: bytes = b"zstd archive bytes " * 1000
    wrong_sha: bool = False
    restored: list[tuple[bytes, str]] = field(default_factory=list)

    def health(self) -> Health:
        self.events.append("health")
        if not self.healthy:
            raise ConnectionError("connection refused")
        return Health.from_answer({"ok": True})

    def sync(self) -> Synced:
        self.events.append("sync")
        return Synced(ok=True)

    def snapshot_to(self, out: BinaryIO) -> SnapshotManifest:
        self.events.append("snapshot_to")
        out.write(self.payload)
        digest = hashlib.sha256(self.payload).hexdigest()
        return SnapshotManifest.from_answer(
            {
                "fileCount": 12,
                "bytes": 40960,
                "archiveBytes": len(self.payload),
                "sha256": "0" * 64 if self.wrong_sha else digest,
                "gitHead": "a" * 40,
            }
        )

    def restore_from(self, src: BinaryIO, expected_sha256: str) -> Restored:
        self.events.append("restore_from")
        self.restored.append((src.read(), expected_sha256))
        return Restored.from_answer({"fileCount": 12})


@dataclass
class World:
    driver: FargateDriver
    ecs: Stubber
    sandboxd: FakeSandboxd
    events: list[str]
    requests: list[tuple[str, dict[str, Any]]]
    factory_calls: list[tuple[str, str]]
    ec2: Any
    efs: Any
    s3: Any


def _record(client: Any, events: list[str], requests: list[tuple[str, dict[str, Any]]]) -> None:
    def hook(params: dict[str, Any], model: Any, **_: Any) -> None:
        events.append(model.name)
        requests.append((model.name, json.loads(json.dumps(params, default=repr))))

    client.meta.events.register("before-parameter-build.*.*", hook)


def make_config(storage: str = "ebs", **overrides: Any) -> FargateConfig:
    values: dict[str, Any] = {
        "cluster": CLUSTER,
        "task_definition": "openagents-sandbox",
        "subnets": ("subnet-a", "subnet-b"),
        "security_groups": ("sg-sandbox",),
        "token_key": KEY,
        "storage": storage,
        "ebs_role_arn": EBS_ROLE,
        "efs_file_system_id": None,
        "artifact_bucket": BUCKET,
        "snapshot_wait_delay_seconds": 0.01,
        "snapshot_wait_max_attempts": 3,
    }
    values.update(overrides)
    return FargateConfig(**values)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def build(storage: str = "ebs", *, ec2: Any = None, efs: Any = None, **cfg: Any) -> World:
    events: list[str] = []
    requests: list[tuple[str, dict[str, Any]]] = []
    ecs = BOTO.client("ecs")
    ec2 = ec2 or BOTO.client("ec2")
    efs = efs or BOTO.client("efs")
    s3 = BOTO.client("s3")
    for client in (ecs, ec2, efs, s3):
        _record(client, events, requests)
    sandboxd = FakeSandboxd(events)
    factory_calls: list[tuple[str, str]] = []

    def factory(endpoint: str, sandbox_token: str) -> Sandboxd:
        factory_calls.append((endpoint, sandbox_token))
        return sandboxd

    driver = FargateDriver(make_config(storage, **cfg), ecs, ec2, efs, s3, factory, lambda: NOW)
    stubber = Stubber(ecs)
    stubber.activate()
    return World(driver, stubber, sandboxd, events, requests, factory_calls, ec2, efs, s3)


@pytest.fixture
def world(aws: None) -> Iterator[World]:
    w = build()
    yield w
    w.ecs.assert_no_pending_responses()


def tags(generation: int = 1) -> list[dict[str, str]]:
    return [
        {"key": "openagents:session-id", "value": SESSION},
        {"key": "openagents:generation", "value": str(generation)},
    ]


def expected_run_task(generation: int = 1, **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "cluster": CLUSTER,
        "taskDefinition": "openagents-sandbox",
        "launchType": "FARGATE",
        "networkConfiguration": {
            "awsvpcConfiguration": {
                "subnets": ["subnet-a", "subnet-b"],
                "securityGroups": ["sg-sandbox"],
                "assignPublicIp": "DISABLED",
            }
        },
        "overrides": {
            "containerOverrides": [
                {
                    "name": "sandboxd",
                    "environment": [
                        {"name": "SANDBOXD_TOKEN", "value": token(generation)},
                        {"name": "OPENAGENTS_SESSION_ID", "value": SESSION},
                    ],
                }
            ]
        },
        "startedBy": "openagents",
        "tags": tags(generation),
        "clientToken": run_task_client_token(SESSION, generation),
    }
    request.update(extra)
    return request


def ebs_volume(generation: int = 1, **extra: Any) -> list[dict[str, Any]]:
    managed: dict[str, Any] = {
        "roleArn": EBS_ROLE,
        "sizeInGiB": 20,
        "volumeType": "gp3",
        "encrypted": True,
        "filesystemType": "ext4",
        "tagSpecifications": [
            {"resourceType": "volume", "tags": tags(generation), "propagateTags": "NONE"}
        ],
        "terminationPolicy": {"deleteOnTermination": True},
    }
    managed.update(extra)
    return [{"name": "workspace", "managedEBSVolume": managed}]


def run_task_ok(arn: str = TASK_ARN) -> dict[str, Any]:
    return {"tasks": [{"taskArn": arn, "lastStatus": "PROVISIONING"}], "failures": []}


def handle(generation: int = 1, **extra: Any) -> SandboxHandle:
    return SandboxHandle(
        driver="fargate", session_id=SESSION, generation=generation, ref=TASK_ARN, **extra
    )


def ebs_ref(size_gib: int = 20, generation: int = 1) -> SnapshotRef:
    return SnapshotRef(
        driver="fargate",
        id="snap-0123456789abcdef0",
        session_id=SESSION,
        generation=generation,
        size_bytes=size_gib * GIB,
        sha256=None,
        created_at=NOW,
        manifest={"kind": "ebs", "volumeId": "vol-1", "sizeGiB": size_gib},
    )


# -- start ------------------------------------------------------------------------------------


def test_start_new_ebs_sandbox_pins_the_run_task_request(world: World) -> None:
    expected = expected_run_task(volumeConfigurations=ebs_volume())
    world.ecs.add_response("run_task", run_task_ok(), expected)

    started = world.driver.start(SESSION, 1)

    assert started == handle()
    assert world.driver.name == "fargate"


def test_resume_from_ebs_snapshot_sets_snapshot_id_and_a_large_enough_volume(world: World) -> None:
    volume = ebs_volume(2, sizeInGiB=30, snapshotId="snap-0123456789abcdef0")
    world.ecs.add_response(
        "run_task", run_task_ok(), expected_run_task(2, volumeConfigurations=volume)
    )

    started = world.driver.start(SESSION, 2, from_snapshot=ebs_ref(size_gib=30))

    assert started.generation == 2


def test_kms_key_is_passed_when_configured(aws: None) -> None:
    w = build(kms_key_id="alias/sandboxes")
    volume = ebs_volume(kmsKeyId="alias/sandboxes")
    w.ecs.add_response("run_task", run_task_ok(), expected_run_task(volumeConfigurations=volume))
    w.driver.start(SESSION, 1)
    w.ecs.assert_no_pending_responses()


def test_a_retried_start_reuses_the_client_token(world: World) -> None:
    expected = expected_run_task(volumeConfigurations=ebs_volume())
    world.ecs.add_response("run_task", run_task_ok(), expected)
    world.ecs.add_response("run_task", run_task_ok(), expected)

    first = world.driver.start(SESSION, 1)
    second = world.driver.start(SESSION, 1)

    assert first == second
    assert run_task_client_token(SESSION, 1) != run_task_client_token(SESSION, 2)
    assert len(run_task_client_token(SESSION, 1)) <= 64


def test_run_task_failures_raise_with_the_reason(world: World) -> None:
    failure = {"arn": "arn:aws:ecs:::x", "reason": "RESOURCE:ENI", "detail": "no free ENIs"}
    world.ecs.add_response("run_task", {"tasks": [], "failures": [failure]})

    with pytest.raises(SandboxError, match=r"RESOURCE:ENI \(no free ENIs\)") as raised:
        world.driver.start(SESSION, 1)
    assert token() not in str(raised.value)


def test_run_task_client_error_raises_sandbox_error(world: World) -> None:
    world.ecs.add_client_error("run_task", "InvalidParameterException", f"bad value {token()}", 400)

    with pytest.raises(SandboxError, match="InvalidParameterException") as raised:
        world.driver.start(SESSION, 1)
    assert token() not in str(raised.value)


@pytest.mark.parametrize(
    "ref",
    [
        ebs_ref().model_copy(update={"driver": "local"}),
        ebs_ref().model_copy(update={"manifest": {"kind": "efs"}}),
    ],
)
def test_start_rejects_snapshots_it_cannot_use(world: World, ref: SnapshotRef) -> None:
    with pytest.raises(SandboxError):
        world.driver.start(SESSION, 2, from_snapshot=ref)


def test_driver_satisfies_the_port(world: World) -> None:
    driver: SandboxDriver = world.driver
    assert driver.token(handle(2)) == token(2)
    with pytest.raises(SandboxError, match="local-driver"):
        driver.start(SESSION, 1, shared_paths=("/srv/repo",))


@pytest.mark.parametrize("session_id", ["../etc", "a/b", "", "x" * 65])
def test_start_rejects_unsafe_session_ids(world: World, session_id: str) -> None:
    with pytest.raises(SandboxError, match="session id"):
        world.driver.start(session_id, 1)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="ebs_role_arn"):
        make_config(ebs_role_arn=None)
    with pytest.raises(ValueError, match="efs_file_system_id"):
        make_config("efs")
    assert "token_key" not in repr(make_config())


# -- EFS start --------------------------------------------------------------------------------

BASE_DEFINITION: dict[str, Any] = {
    "taskDefinitionArn": BASE_DEF_ARN,
    "family": "openagents-sandbox",
    "revision": 7,
    "status": "ACTIVE",
    "taskRoleArn": "arn:aws:iam::123456789012:role/sandbox-task",
    "executionRoleArn": "arn:aws:iam::123456789012:role/sandbox-exec",
    "networkMode": "awsvpc",
    "requiresCompatibilities": ["FARGATE"],
    "compatibilities": ["EC2", "FARGATE"],
    "cpu": "1024",
    "memory": "2048",
    "containerDefinitions": [
        {
            "name": "sandboxd",
            "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sandboxd:1",
            "essential": True,
            "mountPoints": [{"sourceVolume": "workspace", "containerPath": "/workspace"}],
        }
    ],
    "volumes": [{"name": "workspace", "configuredAtLaunch": True}],
}


def efs_world() -> tuple[World, str]:
    efs = BOTO.client("efs")
    fs_id = efs.create_file_system(CreationToken="sandboxes")["FileSystemId"]
    w = build("efs", efs=efs, efs_file_system_id=fs_id)
    return w, fs_id


def session_definition(fs_id: str, access_point: str) -> dict[str, Any]:
    request = {
        k: BASE_DEFINITION[k]
        for k in (
            "taskRoleArn",
            "executionRoleArn",
            "networkMode",
            "containerDefinitions",
            "requiresCompatibilities",
            "cpu",
            "memory",
        )
    }
    request["family"] = f"openagents-sandbox-{SESSION}"
    request["volumes"] = [
        {
            "name": "workspace",
            "efsVolumeConfiguration": {
                "fileSystemId": fs_id,
                "transitEncryption": "ENABLED",
                "authorizationConfig": {"accessPointId": access_point, "iam": "ENABLED"},
            },
        }
    ]
    request["tags"] = [{"key": "openagents:session-id", "value": SESSION}]
    return request


def test_start_efs_creates_access_point_and_session_task_definition(aws: None) -> None:
    w, fs_id = efs_world()
    family = f"openagents-sandbox-{SESSION}"
    session_arn = f"arn:aws:ecs:us-east-1:123456789012:task-definition/{family}:1"
    w.ecs.add_response(
        "describe_task_definition",
        {"taskDefinition": BASE_DEFINITION},
        {"taskDefinition": "openagents-sandbox"},
    )
    w.ecs.add_client_error(
        "describe_task_definition",
        "ClientException",
        "Unable to describe task definition.",
        expected_params={"taskDefinition": family},
    )
    # the access point id is only known once moto created it: pin the request after start
    w.ecs.add_response(
        "register_task_definition",
        {"taskDefinition": {"taskDefinitionArn": session_arn, "family": family}},
    )
    w.ecs.add_response("run_task", run_task_ok(), expected_run_task(taskDefinition=session_arn))

    started = w.driver.start(SESSION, 1)

    w.ecs.assert_no_pending_responses()
    points = w.efs.describe_access_points(FileSystemId=fs_id)["AccessPoints"]
    assert len(points) == 1
    point = points[0]
    assert started.volume_id == point["AccessPointId"]
    assert point["ClientToken"] == access_point_client_token(SESSION)
    assert point["RootDirectory"]["Path"] == f"/sessions/{SESSION}"
    assert point["PosixUser"] == {"Uid": 1000, "Gid": 1000}
    registered = next(p for op, p in w.requests if op == "RegisterTaskDefinition")
    assert registered == session_definition(fs_id, point["AccessPointId"])


def test_efs_start_reuses_a_current_session_task_definition(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, fs_id = efs_world()
    monkeypatch.setattr(
        w.driver._storages["efs"], "_access_point", lambda session_id: "fsap-existing"
    )
    existing = {
        **session_definition(fs_id, "fsap-existing"),
        "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/s:3",
        "status": "ACTIVE",
        "revision": 3,
    }
    existing.pop("tags")
    w.ecs.add_response("describe_task_definition", {"taskDefinition": BASE_DEFINITION})
    w.ecs.add_response("describe_task_definition", {"taskDefinition": existing})
    w.ecs.add_response(
        "run_task",
        run_task_ok(),
        expected_run_task(taskDefinition=existing["taskDefinitionArn"]),
    )

    started = w.driver.start(SESSION, 1)

    w.ecs.assert_no_pending_responses()  # no RegisterTaskDefinition
    assert started.volume_id == "fsap-existing"


def test_existing_access_point_is_reused(aws: None) -> None:
    efs = BOTO.client("efs")
    efs_stub = Stubber(efs)
    efs_stub.add_client_error(
        "create_access_point",
        "AccessPointAlreadyExists",
        "exists",
        409,
        modeled_fields={"ErrorCode": "AccessPointAlreadyExists", "AccessPointId": "fsap-first"},
    )
    efs_stub.activate()
    w = build("efs", efs=efs, efs_file_system_id="fs-12345678")

    assert w.driver._storages["efs"]._access_point(SESSION) == "fsap-first"  # type: ignore[attr-defined]
    efs_stub.assert_no_pending_responses()


def test_efs_start_from_an_ebs_snapshot_is_refused(aws: None) -> None:
    w, _ = efs_world()
    with pytest.raises(SandboxError, match="ebs snapshot cannot seed a efs"):
        w.driver.start(SESSION, 2, from_snapshot=ebs_ref())


# -- probe ------------------------------------------------------------------------------------


def task(status: str, **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "taskArn": TASK_ARN,
        "lastStatus": status,
        "desiredStatus": "RUNNING",
        "attachments": [
            {
                "id": "eni-attachment",
                "type": "ElasticNetworkInterface",
                "status": "ATTACHED",
                "details": [
                    {"name": "subnetId", "value": "subnet-a"},
                    {"name": "networkInterfaceId", "value": "eni-1"},
                    {"name": "privateIPv4Address", "value": "10.0.1.23"},
                ],
            },
            {
                "id": "ebs-attachment",
                "type": "AmazonElasticBlockStorage",
                "status": "ATTACHED",
                "details": [
                    {"name": "volumeName", "value": "workspace"},
                    {"name": "volumeId", "value": "vol-0aaa"},
                    {"name": "deleteOnTermination", "value": "true"},
                ],
            },
        ],
    }
    value.update(extra)
    return value


def describe(world: World, *tasks: dict[str, Any], failures: Any = ()) -> None:
    world.ecs.add_response(
        "describe_tasks",
        {"tasks": list(tasks), "failures": list(failures)},
        {"cluster": CLUSTER, "tasks": [TASK_ARN]},
    )


def test_probe_provisioning_is_starting(world: World) -> None:
    describe(world, task("PROVISIONING", attachments=[]))
    probe = world.driver.probe(handle())
    assert probe.state is SandboxState.STARTING
    assert probe.endpoint is None
    assert world.factory_calls == []


def test_probe_running_and_healthy_is_running_with_endpoint(world: World) -> None:
    describe(world, task("RUNNING"))
    probe = world.driver.probe(handle())
    assert probe.state is SandboxState.RUNNING
    assert probe.endpoint == "http://10.0.1.23:8080"
    assert world.factory_calls == [("http://10.0.1.23:8080", token())]


def test_probe_running_but_unhealthy_is_starting(world: World) -> None:
    world.sandboxd.healthy = False
    describe(world, task("RUNNING"))
    probe = world.driver.probe(handle())
    assert probe.state is SandboxState.STARTING
    assert probe.endpoint == "http://10.0.1.23:8080"
    assert probe.reason is not None
    assert "connection refused" in probe.reason
    assert token() not in probe.reason


def test_probe_running_without_an_address_is_starting(world: World) -> None:
    describe(world, task("RUNNING", attachments=[]))
    assert world.driver.probe(handle()).state is SandboxState.STARTING


@pytest.mark.parametrize("status", ["STOPPED", "DEPROVISIONING", "STOPPING"])
def test_probe_stopped_reports_the_stop_reason(world: World, status: str) -> None:
    describe(
        world, task(status, desiredStatus="STOPPED", stoppedReason="Essential container exited")
    )
    probe = world.driver.probe(handle())
    assert probe.state is SandboxState.STOPPED
    assert probe.reason == "Essential container exited"


def test_probe_missing_task_is_gone(world: World) -> None:
    describe(world, failures=[{"arn": TASK_ARN, "reason": "MISSING"}])
    assert world.driver.probe(handle()).state is SandboxState.GONE


def test_attached_volume_comes_from_the_task_attachment(world: World) -> None:
    describe(world, task("RUNNING"))
    assert world.driver.attached_volume(handle()) == "vol-0aaa"


def test_attached_volume_falls_back_to_the_volume_tags(world: World) -> None:
    ec2 = world.ec2
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=20)  # another session's volume
    ours = ec2.create_volume(
        AvailabilityZone="us-east-1a",
        Size=20,
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": [
                    {"Key": "openagents:session-id", "Value": SESSION},
                    {"Key": "openagents:generation", "Value": "1"},
                ],
            }
        ],
    )["VolumeId"]
    describe(world, task("RUNNING", attachments=task("RUNNING")["attachments"][:1]))
    assert world.driver.attached_volume(handle()) == ours


# -- stop -------------------------------------------------------------------------------------


def stop_params() -> dict[str, Any]:
    return {
        "cluster": CLUSTER,
        "task": TASK_ARN,
        "reason": f"openagents: stop sandbox {SESSION} gen 1",
    }


def test_stop_is_idempotent(world: World) -> None:
    world.ecs.add_response("stop_task", {"task": task("STOPPING")}, stop_params())
    world.ecs.add_response("stop_task", {"task": task("STOPPED")}, stop_params())
    world.ecs.add_client_error(
        "stop_task",
        "InvalidParameterException",
        "The referenced task was not found.",
        expected_params=stop_params(),
    )
    for _ in range(3):
        world.driver.stop(handle())


def test_stop_other_errors_raise(world: World) -> None:
    world.ecs.add_client_error("stop_task", "ClusterNotFoundException", "Cluster not found.")
    with pytest.raises(SandboxError, match="ClusterNotFoundException"):
        world.driver.stop(handle())


# -- EBS snapshots ----------------------------------------------------------------------------


def test_ebs_snapshot_syncs_first_then_snapshots_the_tagged_volume(world: World) -> None:
    volume = world.ec2.create_volume(AvailabilityZone="us-east-1a", Size=20)["VolumeId"]
    describe(world, task("RUNNING", attachments=[_ebs_attachment(volume)]))
    world.events.clear()

    ref = world.driver.snapshot(handle(endpoint="http://10.0.1.23:8080"))

    assert world.events.index("sync") < world.events.index("CreateSnapshot")
    assert ref.driver == "fargate"
    assert ref.id.startswith("snap-")
    assert ref.size_bytes == 20 * GIB
    assert ref.sha256 is None
    assert ref.created_at == NOW
    assert ref.manifest["kind"] == "ebs"
    assert ref.manifest["volumeId"] == volume
    snapshot = world.ec2.describe_snapshots(SnapshotIds=[ref.id])["Snapshots"][0]
    assert snapshot["State"] == "completed"
    assert snapshot["VolumeId"] == volume
    assert {t["Key"]: t["Value"] for t in snapshot["Tags"]} == {
        "openagents:session-id": SESSION,
        "openagents:generation": "1",
    }


def _ebs_attachment(volume_id: str) -> dict[str, Any]:
    return {
        "id": "ebs",
        "type": "AmazonElasticBlockStorage",
        "status": "ATTACHED",
        "details": [{"name": "volumeId", "value": volume_id}],
    }


def test_ebs_snapshot_in_error_state_raises_and_is_discarded(aws: None) -> None:
    ec2 = BOTO.client("ec2")
    ec2_stub = Stubber(ec2)
    ec2_stub.add_response(
        "create_snapshot",
        {"SnapshotId": "snap-0bad", "State": "pending", "VolumeSize": 20, "VolumeId": "vol-1"},
    )
    ec2_stub.add_response(
        "describe_snapshots",
        {"Snapshots": [{"SnapshotId": "snap-0bad", "State": "error", "StateMessage": "boom"}]},
        {"SnapshotIds": ["snap-0bad"]},
    )
    ec2_stub.add_response("delete_snapshot", {}, {"SnapshotId": "snap-0bad"})
    ec2_stub.activate()
    w = build(ec2=ec2)

    with pytest.raises(SandboxError, match="snap-0bad did not complete: state error: boom"):
        w.driver.snapshot(handle(endpoint="http://10.0.1.23:8080", volume_id="vol-1"))
    ec2_stub.assert_no_pending_responses()


def test_ebs_snapshot_waits_through_eventual_consistency(aws: None) -> None:
    ec2 = BOTO.client("ec2")
    ec2_stub = Stubber(ec2)
    ec2_stub.add_response(
        "create_snapshot",
        {"SnapshotId": "snap-0new", "State": "pending", "VolumeSize": 8, "VolumeId": "vol-1"},
    )
    ec2_stub.add_client_error("describe_snapshots", "InvalidSnapshot.NotFound", "not yet")
    ec2_stub.add_response(
        "describe_snapshots", {"Snapshots": [{"SnapshotId": "snap-0new", "State": "pending"}]}
    )
    ec2_stub.add_response(
        "describe_snapshots", {"Snapshots": [{"SnapshotId": "snap-0new", "State": "completed"}]}
    )
    ec2_stub.activate()
    w = build(ec2=ec2)

    ref = w.driver.snapshot(handle(endpoint="http://10.0.1.23:8080", volume_id="vol-1"))

    assert (ref.id, ref.size_bytes) == ("snap-0new", 8 * GIB)
    ec2_stub.assert_no_pending_responses()


def test_ebs_snapshot_that_never_completes_times_out(aws: None) -> None:
    ec2 = BOTO.client("ec2")
    ec2_stub = Stubber(ec2)
    ec2_stub.add_response(
        "create_snapshot",
        {"SnapshotId": "snap-0slow", "State": "pending", "VolumeSize": 8, "VolumeId": "vol-1"},
    )
    for _ in range(3):  # snapshot_wait_max_attempts
        ec2_stub.add_response(
            "describe_snapshots",
            {"Snapshots": [{"SnapshotId": "snap-0slow", "State": "pending"}]},
        )
    ec2_stub.add_response("delete_snapshot", {}, {"SnapshotId": "snap-0slow"})
    ec2_stub.activate()
    w = build(ec2=ec2)

    with pytest.raises(SandboxError, match="snap-0slow did not complete: state pending"):
        w.driver.snapshot(handle(endpoint="http://10.0.1.23:8080", volume_id="vol-1"))
    ec2_stub.assert_no_pending_responses()


def test_ebs_snapshot_of_an_unreachable_sandbox_raises(world: World) -> None:
    describe(world, task("STOPPED", desiredStatus="STOPPED", stoppedReason="gone"))
    with pytest.raises(SandboxError, match="not running"):
        world.driver.snapshot(handle())
    assert "sync" not in world.events


def test_delete_ebs_snapshot_is_idempotent(world: World) -> None:
    volume = world.ec2.create_volume(AvailabilityZone="us-east-1a", Size=20)["VolumeId"]
    snapshot_id = world.ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    ref = ebs_ref().model_copy(update={"id": snapshot_id})

    world.driver.delete_snapshot(ref)
    world.driver.delete_snapshot(ref)

    remaining = world.ec2.describe_snapshots(Filters=[{"Name": "volume-id", "Values": [volume]}])
    assert remaining["Snapshots"] == []


# -- EFS snapshots in S3 ----------------------------------------------------------------------


@pytest.fixture
def efs(aws: None) -> World:
    w, _ = efs_world()
    w.s3.create_bucket(Bucket=BUCKET)
    return w


def efs_handle() -> SandboxHandle:
    return handle(endpoint="http://10.0.1.23:8080", volume_id="fsap-1")


def test_efs_snapshot_uploads_archive_and_manifest(efs: World) -> None:
    ref = efs.driver.snapshot(efs_handle())

    payload = efs.sandboxd.payload
    digest = hashlib.sha256(payload).hexdigest()
    assert ref.id == f"snapshots/{SESSION}/1/20250102T030405678901Z.tar.zst"
    assert ref.sha256 == digest
    assert ref.size_bytes == len(payload)
    assert ref.manifest["kind"] == "efs"
    assert ref.manifest["gitHead"] == "a" * 40
    archive = efs.s3.get_object(Bucket=BUCKET, Key=ref.id)
    assert archive["Body"].read() == payload
    assert archive["Metadata"]["sha256"] == digest
    assert archive["Metadata"]["file-count"] == "12"
    assert archive["Metadata"]["session-id"] == SESSION
    manifest_key = f"snapshots/{SESSION}/1/20250102T030405678901Z.manifest.json"
    assert ref.manifest["manifestKey"] == manifest_key
    manifest = json.loads(efs.s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read())
    assert manifest["sha256"] == digest
    assert manifest["sessionId"] == SESSION
    assert manifest["generation"] == 1


def test_efs_snapshot_checksum_mismatch_uploads_nothing(efs: World) -> None:
    efs.sandboxd.wrong_sha = True

    with pytest.raises(SandboxError, match="sha256 mismatch"):
        efs.driver.snapshot(efs_handle())

    assert efs.s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0
    assert "PutObject" not in efs.events


def test_efs_restore_streams_the_verified_archive(efs: World) -> None:
    ref = efs.driver.snapshot(efs_handle())

    result = efs.driver.restore(efs_handle().model_copy(update={"generation": 2}), ref)

    assert result == Restored.from_answer({"fileCount": 12})
    assert efs.sandboxd.restored == [(efs.sandboxd.payload, ref.sha256)]
    assert efs.factory_calls[-1] == ("http://10.0.1.23:8080", token(2))


def test_efs_restore_refuses_a_corrupt_archive(efs: World) -> None:
    ref = efs.driver.snapshot(efs_handle())
    efs.s3.put_object(Bucket=BUCKET, Key=ref.id, Body=b"tampered")

    with pytest.raises(SandboxError, match="corrupt"):
        efs.driver.restore(efs_handle(), ref)
    assert efs.sandboxd.restored == []


def test_delete_efs_snapshot_is_idempotent(efs: World) -> None:
    ref = efs.driver.snapshot(efs_handle())

    efs.driver.delete_snapshot(ref)
    efs.driver.delete_snapshot(ref)

    assert efs.s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


def test_delete_refuses_another_drivers_snapshot(world: World) -> None:
    with pytest.raises(SandboxError, match="local driver"):
        world.driver.delete_snapshot(ebs_ref().model_copy(update={"driver": "local"}))


# -- the token stays secret -------------------------------------------------------------------


def test_token_only_travels_in_the_container_environment(
    efs: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    w = efs
    w.ecs.add_response("describe_task_definition", {"taskDefinition": BASE_DEFINITION})
    w.ecs.add_client_error("describe_task_definition", "ClientException", "Unable to describe")
    w.ecs.add_response(
        "register_task_definition", {"taskDefinition": {"taskDefinitionArn": BASE_DEF_ARN}}
    )
    w.ecs.add_response("run_task", run_task_ok())
    describe(w, task("RUNNING"))
    w.ecs.add_response("stop_task", {"task": task("STOPPING")})

    started = w.driver.start(SESSION, 1)
    probe = w.driver.probe(started)
    ref = w.driver.snapshot(started.model_copy(update={"endpoint": probe.endpoint}))
    w.driver.restore(started.model_copy(update={"endpoint": probe.endpoint}), ref)
    w.driver.stop(started)
    w.driver.delete_snapshot(ref)

    secret = token()
    carriers = [op for op, params in w.requests if secret in json.dumps(params, default=str)]
    assert carriers == ["RunTask"]
    run_task = next(params for op, params in w.requests if op == "RunTask")
    environment = run_task["overrides"]["containerOverrides"][0]["environment"]
    assert {"name": "SANDBOXD_TOKEN", "value": secret} in environment
    run_task["overrides"] = {}
    assert secret not in json.dumps(run_task)
    assert caplog.records  # the driver did log
    assert secret not in caplog.text
    for value in (started, probe, ref, w.driver, w.driver._config):
        assert secret not in repr(value)
        assert KEY.decode() not in repr(value)
