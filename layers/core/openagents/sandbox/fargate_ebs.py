"""The Fargate driver's EBS storage: the workspace is a managed EBS volume attached at launch
(seeded from the last snapshot), and a snapshot is an EBS snapshot of it."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError, WaiterError
from botocore.waiter import WaiterModel, create_waiter_with_client

from openagents.sandbox.answers import Restored
from openagents.sandbox.fargate_storage import (
    DRIVER_NAME,
    TAG_GENERATION,
    TAG_SESSION,
    FargateConfig,
    Launch,
    attachment_detail,
    ecs_tags,
    error_code,
    error_message,
)
from openagents.sandbox.port import Sandboxd, SandboxError, SandboxHandle, SnapshotRef

log = logging.getLogger(__name__)

GIB = 1024**3
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


class EbsStorage:
    kind = "ebs"

    def __init__(
        self,
        config: FargateConfig,
        ec2: Any,
        describe_task: Callable[[SandboxHandle], dict[str, Any] | None],
        clock: Callable[[], datetime],
    ) -> None:
        self._config = config
        self._ec2 = ec2
        self._describe_task = describe_task
        self._clock = clock

    def launch(self, session_id: str, generation: int, from_snapshot: SnapshotRef | None) -> Launch:
        volume = self._volume(session_id, generation, from_snapshot)
        return Launch(self._config.task_definition, volumes=[volume])

    def _volume(
        self, session_id: str, generation: int, snapshot: SnapshotRef | None
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
                    "tags": ecs_tags(session_id, generation),
                    "propagateTags": "NONE",
                }
            ],
            "terminationPolicy": {"deleteOnTermination": True},
        }
        if cfg.kms_key_id:
            volume["kmsKeyId"] = cfg.kms_key_id
        if snapshot is not None:
            volume["snapshotId"] = snapshot.id
        return {"name": cfg.volume_name, "managedEBSVolume": volume}

    def attached_volume(self, handle: SandboxHandle) -> str | None:
        """The EBS volume attached to the task: on the handle, in the task's attachments, or
        found by its tags."""
        if handle.volume_id:
            return handle.volume_id
        task = self._describe_task(handle)
        if task is not None:
            volume = attachment_detail(task, "AmazonElasticBlockStorage", "volumeId")
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

    def snapshot(self, handle: SandboxHandle, ops: Sandboxd) -> SnapshotRef:
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
            manifest={
                "kind": "ebs",
                "volumeId": volume_id,
                "sizeGiB": size_gib,
                "sync": synced.as_json(),
            },
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
            raise SandboxError(f"EC2 CreateSnapshot failed: {error_message(error)}") from None
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
            log.warning("could not delete failed snapshot %s: %s", snapshot_id, error_code(error))

    def restore(self, handle: SandboxHandle, ref: SnapshotRef) -> Restored:
        """An EBS sandbox resumes from its snapshot at start (``launch``), never through
        sandboxd."""
        raise SandboxError("only S3 (efs) snapshots are restored through sandboxd")

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        try:
            self._ec2.delete_snapshot(SnapshotId=ref.id)
        except ClientError as error:
            if error_code(error) == "InvalidSnapshot.NotFound":
                return
            raise SandboxError(f"EC2 DeleteSnapshot failed: {error_message(error)}") from None


def _snapshot_state(response: Mapping[str, Any] | None) -> str:
    snapshots = (response or {}).get("Snapshots") or []
    if not snapshots:
        return "timed out waiting for the snapshot"
    first = snapshots[0]
    return f"state {first.get('State')}: {first.get('StateMessage') or 'no message'}"
