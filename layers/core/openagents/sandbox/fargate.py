"""The Fargate sandbox driver: one ECS Fargate task running ``sandboxd`` per sandbox generation.

The workspace lives on a managed EBS volume attached at launch (snapshot = EBS snapshot) or on a
per-session EFS access point (snapshot = ``tar.zst`` archive in S3). See ``docs/sandboxes.md``.

The sandbox token is derived (``port.sandbox_token``) and only ever sent to ECS as the container's
environment override: it is never logged, never stored on a handle or snapshot, and scrubbed from
error messages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError, WaiterError
from botocore.waiter import WaiterModel, create_waiter_with_client

from openagents.sandbox.port import (
    ClientFactory,
    Probe,
    SandboxdOps,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
    sandbox_token,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

log = logging.getLogger(__name__)

DRIVER_NAME = "fargate"
STARTED_BY = "openagents"
TAG_SESSION = "openagents:session-id"
TAG_GENERATION = "openagents:generation"
SANDBOX_UID = 1000  # the image's non-root user; EFS access points enforce it
GIB = 1024**3
ARCHIVE_SUFFIX = ".tar.zst"
MANIFEST_SUFFIX = ".manifest.json"

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STOPPED_STATUSES = frozenset({"DEACTIVATING", "STOPPING", "DEPROVISIONING", "STOPPED", "DELETED"})
# Fields of a described task definition that RegisterTaskDefinition accepts back.
_COPIED_TASK_DEFINITION_KEYS = (
    "taskRoleArn",
    "executionRoleArn",
    "networkMode",
    "containerDefinitions",
    "placementConstraints",
    "requiresCompatibilities",
    "cpu",
    "memory",
    "pidMode",
    "ipcMode",
    "proxyConfiguration",
    "inferenceAccelerators",
    "ephemeralStorage",
    "runtimePlatform",
    "enableFaultInjection",
)
# The stock ``snapshot_completed`` waiter has no failure acceptor: an ``error`` snapshot would be
# polled until the timeout. This one fails at once, and retries a not-yet-visible snapshot.
_SNAPSHOT_WAITER = WaiterModel(
    {
        "version": 2,
        "waiters": {
            "SnapshotSettled": {
                "operation": "DescribeSnapshots",
                "delay": 15,
                "maxAttempts": 40,
                "acceptors": [
                    {
                        "matcher": "pathAll",
                        "argument": "Snapshots[].State",
                        "expected": "completed",
                        "state": "success",
                    },
                    {
                        "matcher": "pathAny",
                        "argument": "Snapshots[].State",
                        "expected": "error",
                        "state": "failure",
                    },
                    # EC2 is eventually consistent: a new snapshot may not be listed yet
                    {"matcher": "error", "expected": "InvalidSnapshot.NotFound", "state": "retry"},
                ],
            }
        },
    }
)


@dataclass(frozen=True)
class FargateConfig:
    cluster: str
    task_definition: str  # family[:revision] or ARN; its workspace volume is configuredAtLaunch
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    token_key: bytes = field(repr=False)
    container_name: str = "sandboxd"
    sandbox_port: int = 8080
    volume_name: str = "workspace"
    storage: Literal["ebs", "efs"] = "ebs"
    ebs_role_arn: str | None = None  # ECS infrastructure role for managed EBS volumes
    volume_size_gib: int = 20
    volume_type: str = "gp3"
    kms_key_id: str | None = None
    efs_file_system_id: str | None = None
    artifact_bucket: str | None = None  # EFS snapshots
    snapshot_wait_delay_seconds: float = 15.0
    snapshot_wait_max_attempts: int = 80

    def __post_init__(self) -> None:
        if self.storage not in ("ebs", "efs"):
            raise ValueError(f"storage must be 'ebs' or 'efs', not {self.storage!r}")
        if self.storage == "ebs" and not self.ebs_role_arn:
            raise ValueError("storage 'ebs' needs ebs_role_arn")
        if self.storage == "efs" and not (self.efs_file_system_id and self.artifact_bucket):
            raise ValueError("storage 'efs' needs efs_file_system_id and artifact_bucket")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class FargateDriver:
    name = DRIVER_NAME

    def __init__(
        self,
        config: FargateConfig,
        ecs: Any,
        ec2: Any,
        efs: Any,
        s3: S3Client,
        client_factory: ClientFactory,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._config = config
        self._ecs = ecs
        self._ec2 = ec2
        self._efs = efs
        self._s3 = s3
        self._client_factory = client_factory
        self._clock = clock
        self._base_definition: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"FargateDriver(cluster={self._config.cluster!r}, storage={self._config.storage!r})"

    # -- start ------------------------------------------------------------------------------

    def start(
        self,
        session_id: str,
        generation: int,
        from_snapshot: SnapshotRef | None = None,
        shared_paths: tuple[str, ...] = (),
    ) -> SandboxHandle:
        _check_session_id(session_id)
        if shared_paths:
            raise SandboxError("read-only host paths are a local-driver feature")
        snapshot_id = self._seed_snapshot(from_snapshot)
        volume_id: str | None = None
        if self._config.storage == "efs":
            volume_id = self._access_point(session_id)
            task_definition = self._efs_task_definition(session_id, volume_id)
            volumes: list[dict[str, Any]] = []
        else:
            task_definition = self._config.task_definition
            volumes = [self._ebs_volume(session_id, generation, snapshot_id, from_snapshot)]
        request = self._run_task_request(session_id, generation, task_definition, volumes)
        task_arn = self._run_task(request, self._token(session_id, generation))
        log.info(
            "sandbox task started",
            extra={"sessionId": session_id, "generation": generation, "taskArn": task_arn},
        )
        return SandboxHandle(DRIVER_NAME, session_id, generation, task_arn, volume_id=volume_id)

    def _seed_snapshot(self, ref: SnapshotRef | None) -> str | None:
        """The EBS snapshot a new volume starts from (EFS restores after start, see restore)."""
        if ref is None:
            return None
        kind = _kind(ref)
        if kind != self._config.storage:
            raise SandboxError(f"a {kind} snapshot cannot seed a {self._config.storage} sandbox")
        return ref.id if kind == "ebs" else None

    def _ebs_volume(
        self,
        session_id: str,
        generation: int,
        snapshot_id: str | None,
        snapshot: SnapshotRef | None,
    ) -> dict[str, Any]:
        cfg = self._config
        size = cfg.volume_size_gib
        if snapshot is not None:  # a volume may not be smaller than its snapshot
            size = max(size, math.ceil(snapshot.size_bytes / GIB))
        volume: dict[str, Any] = {
            "roleArn": cfg.ebs_role_arn,
            "sizeInGiB": size,
            "volumeType": cfg.volume_type,
            "encrypted": True,
            "filesystemType": "ext4",
            "tagSpecifications": [
                {
                    "resourceType": "volume",
                    "tags": _ecs_tags(session_id, generation),
                    "propagateTags": "NONE",
                }
            ],
            "terminationPolicy": {"deleteOnTermination": True},
        }
        if cfg.kms_key_id:
            volume["kmsKeyId"] = cfg.kms_key_id
        if snapshot_id:
            volume["snapshotId"] = snapshot_id
        return {"name": cfg.volume_name, "managedEBSVolume": volume}

    def _run_task_request(
        self,
        session_id: str,
        generation: int,
        task_definition: str,
        volumes: list[dict[str, Any]],
    ) -> dict[str, Any]:
        cfg = self._config
        environment = [
            {"name": "SANDBOXD_TOKEN", "value": self._token(session_id, generation)},
            {"name": "OPENAGENTS_SESSION_ID", "value": session_id},
        ]
        request: dict[str, Any] = {
            "cluster": cfg.cluster,
            "taskDefinition": task_definition,
            "launchType": "FARGATE",
            "networkConfiguration": {
                "awsvpcConfiguration": {
                    "subnets": list(cfg.subnets),
                    "securityGroups": list(cfg.security_groups),
                    "assignPublicIp": "DISABLED",
                }
            },
            "overrides": {
                "containerOverrides": [{"name": cfg.container_name, "environment": environment}]
            },
            "startedBy": STARTED_BY,
            "tags": _ecs_tags(session_id, generation),
            "clientToken": run_task_client_token(session_id, generation),
        }
        if volumes:
            request["volumeConfigurations"] = volumes
        return request

    def _run_task(self, request: dict[str, Any], token: str) -> str:
        try:
            response = self._ecs.run_task(**request)
        except ClientError as error:
            raise SandboxError(_redact(f"ECS RunTask failed: {_message(error)}", token)) from None
        failures = response.get("failures") or []
        if failures:
            reasons = "; ".join(_failure_text(failure) for failure in failures)
            raise SandboxError(_redact(f"ECS could not start the sandbox: {reasons}", token))
        tasks = response.get("tasks") or []
        if not tasks:
            raise SandboxError("ECS RunTask returned no task")
        return str(tasks[0]["taskArn"])

    # -- EFS: access point and per-session task definition ----------------------------------

    def _access_point(self, session_id: str) -> str:
        """The session's access point, created once (a retried create finds the first one)."""
        client_token = access_point_client_token(session_id)
        try:
            response = self._efs.create_access_point(
                ClientToken=client_token,
                FileSystemId=self._config.efs_file_system_id,
                PosixUser={"Uid": SANDBOX_UID, "Gid": SANDBOX_UID},
                RootDirectory={
                    "Path": f"/sessions/{session_id}",
                    "CreationInfo": {
                        "OwnerUid": SANDBOX_UID,
                        "OwnerGid": SANDBOX_UID,
                        "Permissions": "750",
                    },
                },
                Tags=[{"Key": TAG_SESSION, "Value": session_id}],
            )
        except ClientError as error:
            if _code(error) != "AccessPointAlreadyExists":
                raise SandboxError(f"EFS CreateAccessPoint failed: {_message(error)}") from None
            return self._existing_access_point(error, client_token)
        return str(response["AccessPointId"])

    def _existing_access_point(self, error: ClientError, client_token: str) -> str:
        known = error.response.get("AccessPointId")  # modelled field of AccessPointAlreadyExists
        if isinstance(known, str) and known:
            return known
        paginator = self._efs.get_paginator("describe_access_points")
        for page in paginator.paginate(FileSystemId=self._config.efs_file_system_id):
            for point in page.get("AccessPoints", []):
                if point.get("ClientToken") == client_token:
                    return str(point["AccessPointId"])
        raise SandboxError("EFS reports the session's access point exists but it was not found")

    def _efs_task_definition(self, session_id: str, access_point_id: str) -> str:
        """A task definition whose workspace volume is the session's access point.

        ECS cannot override EFS volumes per task, so each session gets its own family derived
        from the configured task definition; it is reused while the base is unchanged.
        """
        request = self._derived_definition(session_id, access_point_id)
        existing = self._describe_task_definition(request["family"])
        if existing is not None and _same_definition(existing, request):
            return str(existing["taskDefinitionArn"])
        try:
            response = self._ecs.register_task_definition(**request)
        except ClientError as error:
            raise SandboxError(f"ECS RegisterTaskDefinition failed: {_message(error)}") from None
        return str(response["taskDefinition"]["taskDefinitionArn"])

    def _derived_definition(self, session_id: str, access_point_id: str) -> dict[str, Any]:
        base = self._base_task_definition()
        volume = {
            "name": self._config.volume_name,
            "efsVolumeConfiguration": {
                "fileSystemId": self._config.efs_file_system_id,
                "transitEncryption": "ENABLED",
                "authorizationConfig": {"accessPointId": access_point_id, "iam": "ENABLED"},
            },
        }
        names = [v.get("name") for v in base.get("volumes", [])]
        if self._config.volume_name not in names:
            raise SandboxError(f"task definition has no volume named {self._config.volume_name}")
        volumes = [volume if v.get("name") == volume["name"] else v for v in base["volumes"]]
        request = {k: base[k] for k in _COPIED_TASK_DEFINITION_KEYS if k in base}
        request.update(
            family=f"{base['family']}-{session_id}",
            volumes=volumes,
            tags=[{"key": TAG_SESSION, "value": session_id}],
        )
        return request

    def _base_task_definition(self) -> dict[str, Any]:
        if self._base_definition is None:
            found = self._describe_task_definition(self._config.task_definition)
            if found is None:
                raise SandboxError(f"task definition {self._config.task_definition} not found")
            self._base_definition = found
        return self._base_definition

    def _describe_task_definition(self, name: str) -> dict[str, Any] | None:
        try:
            response = self._ecs.describe_task_definition(taskDefinition=name)
        except ClientError as error:
            if _code(error) == "ClientException":  # "Unable to describe task definition."
                return None
            raise SandboxError(f"ECS DescribeTaskDefinition failed: {_message(error)}") from None
        definition: dict[str, Any] = response["taskDefinition"]
        return definition if definition.get("status", "ACTIVE") == "ACTIVE" else None

    # -- probe ------------------------------------------------------------------------------

    def probe(self, handle: SandboxHandle) -> Probe:
        task = self._describe_task(handle)
        if task is None:
            return Probe(SandboxState.GONE, reason="task not found")
        status = str(task.get("lastStatus", ""))
        if status in _STOPPED_STATUSES or task.get("desiredStatus") == "STOPPED":
            return Probe(SandboxState.STOPPED, reason=task.get("stoppedReason") or status.lower())
        if status != "RUNNING":
            return Probe(SandboxState.STARTING, reason=f"task {status.lower() or 'pending'}")
        endpoint = self._endpoint_of(task)
        if endpoint is None:
            return Probe(SandboxState.STARTING, reason="task has no private IP yet")
        return self._health(handle, endpoint)

    def _health(self, handle: SandboxHandle, endpoint: str) -> Probe:
        token = self._token(handle.session_id, handle.generation)
        try:
            self._client_factory(endpoint, token).health()
        except Exception as error:  # any failure means "not ready yet"
            reason = _redact(f"sandboxd not healthy: {type(error).__name__}: {error}", token)
            return Probe(SandboxState.STARTING, endpoint=endpoint, reason=reason)
        return Probe(SandboxState.RUNNING, endpoint=endpoint)

    def _endpoint_of(self, task: Mapping[str, Any]) -> str | None:
        address = _attachment_detail(task, "ElasticNetworkInterface", "privateIPv4Address")
        return f"http://{address}:{self._config.sandbox_port}" if address else None

    def _describe_task(self, handle: SandboxHandle) -> dict[str, Any] | None:
        try:
            response = self._ecs.describe_tasks(cluster=self._config.cluster, tasks=[handle.ref])
        except ClientError as error:
            raise SandboxError(f"ECS DescribeTasks failed: {_message(error)}") from None
        tasks = response.get("tasks") or []
        return dict(tasks[0]) if tasks else None

    def attached_volume(self, handle: SandboxHandle) -> str | None:
        """The EBS volume attached to the task (EFS: the session's access point)."""
        if self._config.storage == "efs" or handle.volume_id:
            return handle.volume_id
        task = self._describe_task(handle)
        if task is not None:
            volume = _attachment_detail(task, "AmazonElasticBlockStorage", "volumeId")
            if volume:
                return volume
        return self._volume_by_tags(handle)

    def _volume_by_tags(self, handle: SandboxHandle) -> str | None:
        response = self._ec2.describe_volumes(
            Filters=[
                {"Name": f"tag:{TAG_SESSION}", "Values": [handle.session_id]},
                {"Name": f"tag:{TAG_GENERATION}", "Values": [str(handle.generation)]},
            ]
        )
        volumes = sorted(response.get("Volumes", []), key=lambda v: v.get("CreateTime", ""))
        return str(volumes[-1]["VolumeId"]) if volumes else None

    def client(self, handle: SandboxHandle) -> SandboxdOps:
        """A sandboxd client for a running sandbox."""
        endpoint = handle.endpoint
        if endpoint is None:
            probe = self.probe(handle)
            if probe.state is not SandboxState.RUNNING or probe.endpoint is None:
                raise SandboxError(f"sandbox is not running ({probe.state}: {probe.reason})")
            endpoint = probe.endpoint
        return self._client_factory(endpoint, self._token(handle.session_id, handle.generation))

    # -- snapshot ---------------------------------------------------------------------------

    def snapshot(self, handle: SandboxHandle) -> SnapshotRef:
        ops = self.client(handle)
        if self._config.storage == "efs":
            return self._snapshot_to_s3(handle, ops)
        return self._snapshot_ebs(handle, ops)

    def _snapshot_ebs(self, handle: SandboxHandle, ops: SandboxdOps) -> SnapshotRef:
        volume_id = self.attached_volume(handle)
        if volume_id is None:
            raise SandboxError("no EBS volume is attached to the sandbox task")
        synced = ops.sync()
        created = self._create_snapshot(handle, volume_id)
        snapshot_id = str(created["SnapshotId"])
        self._wait_completed(snapshot_id)
        size_gib = int(created.get("VolumeSize") or 0)
        log.info(
            "sandbox snapshot completed",
            extra={"sessionId": handle.session_id, "snapshotId": snapshot_id},
        )
        return SnapshotRef(
            driver=DRIVER_NAME,
            id=snapshot_id,
            session_id=handle.session_id,
            generation=handle.generation,
            size_bytes=size_gib * GIB,
            sha256=None,
            created_at=self._clock(),
            manifest={"kind": "ebs", "volumeId": volume_id, "sizeGiB": size_gib, "sync": synced},
        )

    def _create_snapshot(self, handle: SandboxHandle, volume_id: str) -> dict[str, Any]:
        tags = [
            {"Key": TAG_SESSION, "Value": handle.session_id},
            {"Key": TAG_GENERATION, "Value": str(handle.generation)},
        ]
        try:
            created: dict[str, Any] = self._ec2.create_snapshot(
                VolumeId=volume_id,
                Description=f"openagents sandbox {handle.session_id} gen {handle.generation}",
                TagSpecifications=[{"ResourceType": "snapshot", "Tags": tags}],
            )
        except ClientError as error:
            raise SandboxError(f"EC2 CreateSnapshot failed: {_message(error)}") from None
        return created

    def _wait_completed(self, snapshot_id: str) -> None:
        waiter = create_waiter_with_client("SnapshotSettled", _SNAPSHOT_WAITER, self._ec2)
        config = {
            "Delay": self._config.snapshot_wait_delay_seconds,
            "MaxAttempts": self._config.snapshot_wait_max_attempts,
        }
        try:
            waiter.wait(SnapshotIds=[snapshot_id], WaiterConfig=config)
        except WaiterError as error:
            self._discard_snapshot(snapshot_id)
            detail = _snapshot_state(error.last_response)
            raise SandboxError(f"EBS snapshot {snapshot_id} did not complete: {detail}") from None

    def _discard_snapshot(self, snapshot_id: str) -> None:
        try:
            self._ec2.delete_snapshot(SnapshotId=snapshot_id)
        except ClientError as error:  # best effort: the snapshot is tagged for the reconciler
            log.warning("could not delete failed snapshot %s: %s", snapshot_id, _code(error))

    def _snapshot_to_s3(self, handle: SandboxHandle, ops: SandboxdOps) -> SnapshotRef:
        key = self._archive_key(handle)
        with tempfile.TemporaryFile() as archive:
            manifest = ops.snapshot_to(archive)
            digest, size = _digest(archive)
            _check_manifest(manifest, digest, size)
            self._upload(archive, key, manifest, handle)
        log.info("sandbox snapshot uploaded", extra={"sessionId": handle.session_id, "key": key})
        return SnapshotRef(
            driver=DRIVER_NAME,
            id=key,
            session_id=handle.session_id,
            generation=handle.generation,
            size_bytes=size,
            sha256=digest,
            created_at=self._clock(),
            manifest={
                **manifest,
                "kind": "efs",
                "bucket": self._bucket(),
                "manifestKey": _manifest_key(key),
            },
        )

    def _archive_key(self, handle: SandboxHandle) -> str:
        stamp = self._clock().strftime("%Y%m%dT%H%M%S%fZ")
        return f"snapshots/{handle.session_id}/{handle.generation}/{stamp}{ARCHIVE_SUFFIX}"

    def _upload(
        self, archive: BinaryIO, key: str, manifest: dict[str, Any], handle: SandboxHandle
    ) -> None:
        metadata = _object_metadata(manifest, handle)
        document = {**manifest, "sessionId": handle.session_id, "generation": handle.generation}
        archive.seek(0)
        try:
            self._s3.upload_fileobj(
                archive,
                self._bucket(),
                key,
                ExtraArgs={"Metadata": metadata, "ContentType": "application/zstd"},
            )
            self._s3.put_object(
                Bucket=self._bucket(),
                Key=_manifest_key(key),
                Body=json.dumps(document, sort_keys=True).encode(),
                ContentType="application/json",
                Metadata=metadata,
            )
        except (ClientError, S3UploadFailedError) as error:
            raise SandboxError(f"snapshot upload failed: {error}") from None

    def _bucket(self, ref: SnapshotRef | None = None) -> str:
        if ref is not None and ref.manifest.get("bucket"):
            return str(ref.manifest["bucket"])
        return str(self._config.artifact_bucket)

    # -- restore (EFS) ----------------------------------------------------------------------

    def restore(self, handle: SandboxHandle, ref: SnapshotRef) -> dict[str, Any]:
        """Unpack an S3 snapshot into a running EFS sandbox (EBS resumes at start instead)."""
        if _kind(ref) != "efs":
            raise SandboxError("only S3 (efs) snapshots are restored through sandboxd")
        expected = ref.sha256 or str(ref.manifest.get("sha256") or "")
        if not expected:
            raise SandboxError("snapshot has no sha256 to verify")
        ops = self.client(handle)
        with tempfile.TemporaryFile() as archive:
            try:
                self._s3.download_fileobj(self._bucket(ref), ref.id, archive)
            except ClientError as error:
                raise SandboxError(f"snapshot download failed: {_message(error)}") from None
            digest, _ = _digest(archive)
            if digest != expected:
                raise SandboxError(f"snapshot {ref.id} is corrupt: sha256 mismatch")
            archive.seek(0)
            return ops.restore_from(archive, expected)

    # -- stop and delete --------------------------------------------------------------------

    def stop(self, handle: SandboxHandle) -> None:
        reason = f"openagents: stop sandbox {handle.session_id} gen {handle.generation}"
        try:
            self._ecs.stop_task(cluster=self._config.cluster, task=handle.ref, reason=reason)
        except ClientError as error:
            if _code(error) == "InvalidParameterException" and "not found" in _message(error):
                log.info("sandbox task already gone", extra={"taskArn": handle.ref})
                return
            raise SandboxError(f"ECS StopTask failed: {_message(error)}") from None
        log.info("sandbox task stopping", extra={"taskArn": handle.ref})

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        if _kind(ref) == "ebs":
            self._delete_ebs_snapshot(ref.id)
        else:
            self._delete_archive(ref)

    def _delete_ebs_snapshot(self, snapshot_id: str) -> None:
        try:
            self._ec2.delete_snapshot(SnapshotId=snapshot_id)
        except ClientError as error:
            if _code(error) == "InvalidSnapshot.NotFound":
                return
            raise SandboxError(f"EC2 DeleteSnapshot failed: {_message(error)}") from None

    def _delete_archive(self, ref: SnapshotRef) -> None:
        objects: list[ObjectIdentifierTypeDef] = [{"Key": ref.id}, {"Key": _manifest_key(ref.id)}]
        try:
            response = self._s3.delete_objects(
                Bucket=self._bucket(ref), Delete={"Objects": objects, "Quiet": True}
            )
        except ClientError as error:
            raise SandboxError(f"S3 DeleteObjects failed: {_message(error)}") from None
        errors = response.get("Errors") or []
        if errors:
            raise SandboxError(f"S3 could not delete {errors[0].get('Key')}: {errors[0]['Code']}")

    def close(self) -> None:
        """Fargate tasks outlive the control plane's processes: nothing to release."""

    def token(self, handle: SandboxHandle) -> str:
        """The sandbox's bearer token, for the control plane's sandboxd client only."""
        return self._token(handle.session_id, handle.generation)

    def endpoint(self, handle: SandboxHandle) -> str:
        """The task's private address, recorded by this driver when the task came up."""
        if handle.endpoint is None:
            raise SandboxError("the sandbox has no endpoint yet")
        return handle.endpoint

    def _token(self, session_id: str, generation: int) -> str:
        return sandbox_token(self._config.token_key, session_id, generation)


# -- helpers ----------------------------------------------------------------------------------


def run_task_client_token(session_id: str, generation: int) -> str:
    """Deterministic per (session, generation): a retried start finds the first task."""
    digest = hashlib.sha256(f"run-task:{session_id}:{generation}".encode()).hexdigest()
    return f"openagents-{digest[:40]}"


def access_point_client_token(session_id: str) -> str:
    digest = hashlib.sha256(f"access-point:{session_id}".encode()).hexdigest()
    return f"openagents-{digest[:40]}"


def _check_session_id(session_id: str) -> None:
    # used in EFS paths, S3 keys and task definition families: no "/" or ".." may slip in
    if not _SESSION_ID.match(session_id):
        raise SandboxError("session id must be 1-64 letters, digits, '-' or '_'")


def _kind(ref: SnapshotRef) -> str:
    if ref.driver != DRIVER_NAME:
        raise SandboxError(f"snapshot {ref.id} belongs to the {ref.driver} driver")
    kind = ref.manifest.get("kind") or ("ebs" if ref.id.startswith("snap-") else "efs")
    return str(kind)


def _ecs_tags(session_id: str, generation: int) -> list[dict[str, str]]:
    return [
        {"key": TAG_SESSION, "value": session_id},
        {"key": TAG_GENERATION, "value": str(generation)},
    ]


def _same_definition(existing: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    """True when ``existing`` was registered from the current base for the same access point.

    Volumes are compared by access point only: ECS may fill defaults into a described volume.
    """
    if _access_point_ids(existing) != _access_point_ids(request):
        return False
    return all(existing.get(k) == request.get(k) for k in _COPIED_TASK_DEFINITION_KEYS)


def _access_point_ids(definition: Mapping[str, Any]) -> list[str | None]:
    return [
        (v.get("efsVolumeConfiguration") or {}).get("authorizationConfig", {}).get("accessPointId")
        for v in definition.get("volumes") or []
    ]


def _attachment_detail(task: Mapping[str, Any], kind: str, name: str) -> str | None:
    for attachment in task.get("attachments") or []:
        if attachment.get("type") != kind:
            continue
        for detail in attachment.get("details") or []:
            if detail.get("name") == name and detail.get("value"):
                return str(detail["value"])
    return None


def _digest(archive: BinaryIO) -> tuple[str, int]:
    archive.seek(0)
    sha = hashlib.sha256()
    size = 0
    while chunk := archive.read(1024 * 1024):
        sha.update(chunk)
        size += len(chunk)
    return sha.hexdigest(), size


def _check_manifest(manifest: Mapping[str, Any], digest: str, size: int) -> None:
    if manifest.get("sha256") != digest:
        raise SandboxError("snapshot archive does not match its manifest: sha256 mismatch")
    declared = manifest.get("archiveBytes")
    if declared is not None and int(declared) != size:
        raise SandboxError(
            f"snapshot archive does not match its manifest: {size} bytes, {declared} declared"
        )


def _object_metadata(manifest: Mapping[str, Any], handle: SandboxHandle) -> dict[str, str]:
    fields = {
        "sha256": manifest.get("sha256"),
        "file-count": manifest.get("fileCount"),
        "bytes": manifest.get("bytes"),
        "archive-bytes": manifest.get("archiveBytes"),
        "git-head": manifest.get("gitHead"),
        "session-id": handle.session_id,
        "generation": handle.generation,
    }
    return {key: str(value) for key, value in fields.items() if value is not None}


def _manifest_key(archive_key: str) -> str:
    return archive_key.removesuffix(ARCHIVE_SUFFIX) + MANIFEST_SUFFIX


def _snapshot_state(response: Mapping[str, Any] | None) -> str:
    snapshots = (response or {}).get("Snapshots") or []
    if not snapshots:
        return "timed out waiting for the snapshot"
    first = snapshots[0]
    return f"state {first.get('State')}: {first.get('StateMessage') or 'no message'}"


def _failure_text(failure: Mapping[str, Any]) -> str:
    text = str(failure.get("reason") or "unknown reason")
    if failure.get("detail"):
        text += f" ({failure['detail']})"
    return text


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _message(error: ClientError) -> str:
    message = error.response.get("Error", {}).get("Message") or ""
    return f"{_code(error)}: {message}" if message else _code(error)


def _redact(text: str, token: str) -> str:
    return text.replace(token, "[redacted]")
