"""What the Fargate driver (``fargate.py``) and its two workspace storage strategies
(``fargate_ebs.py``, ``fargate_efs.py``) share: the driver's configuration, the strategy's
protocol, resource names and tags, and how an AWS error reads in a ``SandboxError``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from botocore.exceptions import ClientError

from openagents.sandbox.answers import Restored
from openagents.sandbox.port import Sandboxd, SandboxError, SandboxHandle, SnapshotRef

DRIVER_NAME = "fargate"
TAG_SESSION = "openagents:session-id"
TAG_GENERATION = "openagents:generation"


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


@dataclass(frozen=True)
class Launch:
    """How a task gets its workspace: the task definition to run, the volumes configured at
    launch, and the volume id the handle records (EFS: the session's access point)."""

    task_definition: str
    volumes: list[dict[str, Any]] = field(default_factory=list)
    volume_id: str | None = None


class Storage(Protocol):
    """One way to keep a sandbox's workspace: on a managed EBS volume (snapshot = EBS
    snapshot) or on an EFS access point (snapshot = ``tar.zst`` archive in S3)."""

    kind: str  # "ebs" or "efs": a snapshot's manifest names the strategy that made it

    def launch(
        self, session_id: str, generation: int, from_snapshot: SnapshotRef | None
    ) -> Launch: ...

    def attached_volume(self, handle: SandboxHandle) -> str | None: ...

    def snapshot(self, handle: SandboxHandle, ops: Sandboxd) -> SnapshotRef: ...

    def restore(self, handle: SandboxHandle, ref: SnapshotRef) -> Restored: ...

    def delete_snapshot(self, ref: SnapshotRef) -> None: ...


def snapshot_kind(ref: SnapshotRef) -> str:
    if ref.driver != DRIVER_NAME:
        raise SandboxError(f"snapshot {ref.id} belongs to the {ref.driver} driver")
    kind = ref.manifest.get("kind") or ("ebs" if ref.id.startswith("snap-") else "efs")
    return str(kind)


def ecs_tags(session_id: str, generation: int) -> list[dict[str, str]]:
    return [
        {"key": TAG_SESSION, "value": session_id},
        {"key": TAG_GENERATION, "value": str(generation)},
    ]


def attachment_detail(task: Mapping[str, Any], kind: str, name: str) -> str | None:
    for attachment in task.get("attachments") or []:
        if attachment.get("type") != kind:
            continue
        for detail in attachment.get("details") or []:
            if detail.get("name") == name and detail.get("value"):
                return str(detail["value"])
    return None


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    message = error.response.get("Error", {}).get("Message") or ""
    return f"{error_code(error)}: {message}" if message else error_code(error)
