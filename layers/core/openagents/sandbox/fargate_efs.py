"""The Fargate driver's EFS storage: the workspace is the session's EFS access point, mounted
through a task definition derived per session (ECS cannot override EFS volumes per task); a
snapshot is a ``tar.zst`` archive sandboxd streams, verified and kept in S3 with its manifest,
and a restore streams it back into the running sandbox."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError

from openagents.sandbox.answers import Restored, SnapshotManifest
from openagents.sandbox.fargate_storage import (
    DRIVER_NAME,
    TAG_SESSION,
    FargateConfig,
    Launch,
    error_code,
    error_message,
)
from openagents.sandbox.port import (
    Sandboxd,
    SandboxdClients,
    SandboxError,
    SandboxHandle,
    SnapshotRef,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef


log = logging.getLogger(__name__)

SANDBOX_UID = 1000  # the image's non-root user; EFS access points enforce it
ARCHIVE_SUFFIX = ".tar.zst"
MANIFEST_SUFFIX = ".manifest.json"
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


class EfsStorage:
    kind = "efs"

    def __init__(
        self,
        config: FargateConfig,
        ecs: Any,
        efs: Any,
        s3: S3Client,
        client: SandboxdClients,
        clock: Callable[[], datetime],
    ) -> None:
        self._config = config
        self._ecs = ecs
        self._efs = efs
        self._s3 = s3
        self._client = client
        self._clock = clock
        self._base_definition: dict[str, Any] | None = None

    # -- launch: access point and per-session task definition -------------------------------

    def launch(self, session_id: str, generation: int, from_snapshot: SnapshotRef | None) -> Launch:
        """The session's access point and its task definition; a snapshot is restored after
        start (``restore``)."""
        access_point = self._access_point(session_id)
        return Launch(self._task_definition(session_id, access_point), volume_id=access_point)

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
            if error_code(error) != "AccessPointAlreadyExists":
                raise SandboxError(
                    f"EFS CreateAccessPoint failed: {error_message(error)}"
                ) from None
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

    def _task_definition(self, session_id: str, access_point_id: str) -> str:
        """A task definition whose workspace volume is the session's access point: its own
        family derived from the configured task definition, reused while the base is
        unchanged."""
        request = self._derived_definition(session_id, access_point_id)
        existing = self._describe_task_definition(request["family"])
        if existing is not None and _same_definition(existing, request):
            return str(existing["taskDefinitionArn"])
        try:
            response = self._ecs.register_task_definition(**request)
        except ClientError as error:
            raise SandboxError(
                f"ECS RegisterTaskDefinition failed: {error_message(error)}"
            ) from None
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
            if error_code(error) == "ClientException":  # "Unable to describe task definition."
                return None
            raise SandboxError(
                f"ECS DescribeTaskDefinition failed: {error_message(error)}"
            ) from None
        definition: dict[str, Any] = response["taskDefinition"]
        return definition if definition.get("status", "ACTIVE") == "ACTIVE" else None

    def attached_volume(self, handle: SandboxHandle) -> str | None:
        """The session's access point, recorded on the handle at start."""
        return handle.volume_id

    # -- snapshot and restore through sandboxd and S3 ---------------------------------------

    def snapshot(self, handle: SandboxHandle, ops: Sandboxd) -> SnapshotRef:
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
                **manifest.as_json(),
                "kind": "efs",
                "bucket": self._bucket(),
                "manifestKey": _manifest_key(key),
            },
        )

    def _archive_key(self, handle: SandboxHandle) -> str:
        stamp = self._clock().strftime("%Y%m%dT%H%M%S%fZ")
        return f"snapshots/{handle.session_id}/{handle.generation}/{stamp}{ARCHIVE_SUFFIX}"

    def _upload(
        self, archive: BinaryIO, key: str, manifest: SnapshotManifest, handle: SandboxHandle
    ) -> None:
        metadata = _object_metadata(manifest, handle)
        document = {
            **manifest.as_json(),
            "sessionId": handle.session_id,
            "generation": handle.generation,
        }
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

    def restore(self, handle: SandboxHandle, ref: SnapshotRef) -> Restored:
        """Unpack an S3 snapshot into the running sandbox, its sha256 checked first."""
        expected = ref.sha256 or str(ref.manifest.get("sha256") or "")
        if not expected:
            raise SandboxError("snapshot has no sha256 to verify")
        ops = self._client(handle)
        with tempfile.TemporaryFile() as archive:
            try:
                self._s3.download_fileobj(self._bucket(ref), ref.id, archive)
            except ClientError as error:
                raise SandboxError(f"snapshot download failed: {error_message(error)}") from None
            digest, _ = _digest(archive)
            if digest != expected:
                raise SandboxError(f"snapshot {ref.id} is corrupt: sha256 mismatch")
            archive.seek(0)
            return ops.restore_from(archive, expected)

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        objects: list[ObjectIdentifierTypeDef] = [{"Key": ref.id}, {"Key": _manifest_key(ref.id)}]
        try:
            response = self._s3.delete_objects(
                Bucket=self._bucket(ref), Delete={"Objects": objects, "Quiet": True}
            )
        except ClientError as error:
            raise SandboxError(f"S3 DeleteObjects failed: {error_message(error)}") from None
        errors = response.get("Errors") or []
        if errors:
            raise SandboxError(f"S3 could not delete {errors[0].get('Key')}: {errors[0]['Code']}")


def access_point_client_token(session_id: str) -> str:
    digest = hashlib.sha256(f"access-point:{session_id}".encode()).hexdigest()
    return f"openagents-{digest[:40]}"


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


def _digest(archive: BinaryIO) -> tuple[str, int]:
    archive.seek(0)
    sha = hashlib.sha256()
    size = 0
    while chunk := archive.read(1024 * 1024):
        sha.update(chunk)
        size += len(chunk)
    return sha.hexdigest(), size


def _check_manifest(manifest: SnapshotManifest, digest: str, size: int) -> None:
    if manifest.sha256 != digest:
        raise SandboxError("snapshot archive does not match its manifest: sha256 mismatch")
    declared = manifest.archive_bytes
    if declared is not None and declared != size:
        raise SandboxError(
            f"snapshot archive does not match its manifest: {size} bytes, {declared} declared"
        )


def _object_metadata(manifest: SnapshotManifest, handle: SandboxHandle) -> dict[str, str]:
    fields = {
        "sha256": manifest.sha256,
        "file-count": manifest.file_count,
        "bytes": manifest.bytes,
        "archive-bytes": manifest.archive_bytes,
        "git-head": manifest.git_head,
        "session-id": handle.session_id,
        "generation": handle.generation,
    }
    return {key: str(value) for key, value in fields.items() if value is not None}


def _manifest_key(archive_key: str) -> str:
    return archive_key.removesuffix(ARCHIVE_SUFFIX) + MANIFEST_SUFFIX
