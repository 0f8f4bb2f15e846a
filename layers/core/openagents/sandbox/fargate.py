"""The Fargate sandbox driver: one ECS Fargate task running ``sandboxd`` per sandbox generation.

The driver runs, probes and stops the tasks; where the workspace lives is its storage strategy
(``fargate_storage.Storage``): a managed EBS volume attached at launch, snapshot = EBS snapshot
(``fargate_ebs.py``), or a per-session EFS access point, snapshot = ``tar.zst`` archive in S3
(``fargate_efs.py``). See ``docs/sandboxes.md``.

The sandbox token is derived (``port.sandbox_token``) and only ever sent to ECS as the container's
environment override: it is never logged, never stored on a handle or snapshot, and scrubbed from
error messages.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from openagents.sandbox.answers import Restored
from openagents.sandbox.errors import CAPACITY
from openagents.sandbox.fargate_ebs import EbsStorage
from openagents.sandbox.fargate_efs import EfsStorage
from openagents.sandbox.fargate_storage import (
    DRIVER_NAME,
    FargateConfig,
    Storage,
    attachment_detail,
    ecs_tags,
    error_code,
    error_message,
    snapshot_kind,
)
from openagents.sandbox.port import (
    ClientFactory,
    Probe,
    Sandboxd,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
    sandbox_token,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)

STARTED_BY = "openagents"

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STOPPED_STATUSES = frozenset({"DEACTIVATING", "STOPPING", "DEPROVISIONING", "STOPPED", "DELETED"})
# Refusals for want of capacity (``errors.CAPACITY``), not for a fault: the RunTask rate
# (ThrottlingException), the account's Fargate vCPU quota ("You've reached the limit on the
# number of vCPUs you can run concurrently": a failure of a 200 answer), no Fargate capacity in
# the AZs, no free ENI or address. The same start succeeds later: provisioning waits.
_THROTTLED = frozenset({"ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"})
_CAPACITY_REASONS = ("limit on the number of vcpus", "capacity is unavailable", "resource:")


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
        self._client_factory = client_factory
        # Both strategies: a snapshot is deleted (or refused a restore) by the kind that made
        # it, whatever the configured storage; new sandboxes use the configured one.
        self._storages: dict[str, Storage] = {
            "ebs": EbsStorage(config, ec2, self._describe_task, clock),
            "efs": EfsStorage(config, ecs, efs, s3, self.client, clock),
        }
        self._storage = self._storages[config.storage]

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
        if from_snapshot is not None:
            kind = snapshot_kind(from_snapshot)
            if kind != self._storage.kind:
                raise SandboxError(f"a {kind} snapshot cannot seed a {self._storage.kind} sandbox")
        launch = self._storage.launch(session_id, generation, from_snapshot)
        request = self._run_task_request(
            session_id, generation, launch.task_definition, launch.volumes
        )
        task_arn = self._run_task(request, self._token(session_id, generation))
        log.info(
            "sandbox task started",
            extra={"sessionId": session_id, "generation": generation, "taskArn": task_arn},
        )
        return SandboxHandle(
            driver=DRIVER_NAME,
            session_id=session_id,
            generation=generation,
            ref=task_arn,
            volume_id=launch.volume_id,
        )

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
            "tags": ecs_tags(session_id, generation),
            "clientToken": run_task_client_token(session_id, generation),
        }
        if volumes:
            request["volumeConfigurations"] = volumes
        return request

    def _run_task(self, request: dict[str, Any], token: str) -> str:
        try:
            response = self._ecs.run_task(**request)
        except ClientError as error:
            message = f"ECS RunTask failed: {error_message(error)}"
            code = CAPACITY if error_code(error) in _THROTTLED else None
            raise SandboxError(_redact(message, token), code=code) from None
        failures = response.get("failures") or []
        if failures:
            reasons = "; ".join(_failure_text(failure) for failure in failures)
            code = CAPACITY if all(_is_capacity(failure) for failure in failures) else None
            message = _redact(f"ECS could not start the sandbox: {reasons}", token)
            raise SandboxError(message, code=code)
        tasks = response.get("tasks") or []
        if not tasks:
            raise SandboxError("ECS RunTask returned no task")
        return str(tasks[0]["taskArn"])

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
        address = attachment_detail(task, "ElasticNetworkInterface", "privateIPv4Address")
        return f"http://{address}:{self._config.sandbox_port}" if address else None

    def _describe_task(self, handle: SandboxHandle) -> dict[str, Any] | None:
        try:
            response = self._ecs.describe_tasks(cluster=self._config.cluster, tasks=[handle.ref])
        except ClientError as error:
            raise SandboxError(f"ECS DescribeTasks failed: {error_message(error)}") from None
        tasks = response.get("tasks") or []
        return dict(tasks[0]) if tasks else None

    def attached_volume(self, handle: SandboxHandle) -> str | None:
        """The EBS volume attached to the task (EFS: the session's access point)."""
        return self._storage.attached_volume(handle)

    def client(self, handle: SandboxHandle) -> Sandboxd:
        """A sandboxd client for a running sandbox."""
        endpoint = handle.endpoint
        if endpoint is None:
            probe = self.probe(handle)
            if probe.state is not SandboxState.RUNNING or probe.endpoint is None:
                raise SandboxError(f"sandbox is not running ({probe.state}: {probe.reason})")
            endpoint = probe.endpoint
        return self._client_factory(endpoint, self._token(handle.session_id, handle.generation))

    # -- snapshot, restore, delete: the storage's -------------------------------------------

    def snapshot(self, handle: SandboxHandle) -> SnapshotRef:
        return self._storage.snapshot(handle, self.client(handle))

    def restore(self, handle: SandboxHandle, ref: SnapshotRef) -> Restored:
        """Unpack an S3 snapshot into a running EFS sandbox (EBS resumes at start instead)."""
        return self._storages[snapshot_kind(ref)].restore(handle, ref)

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        self._storages[snapshot_kind(ref)].delete_snapshot(ref)

    def kill_commands(self, handle: SandboxHandle) -> int:
        """A no-op: ECS cannot reach into a running task's processes (no exec into the task is
        configured, and ECS Exec would run as another process of the same task, not above it).
        A wedged task is stopped (``stop``: the micro-VM goes with everything in it), and its
        work is recovered from the last snapshot."""
        del handle
        return 0

    # -- stop -------------------------------------------------------------------------------

    def stop(self, handle: SandboxHandle) -> None:
        reason = f"openagents: stop sandbox {handle.session_id} gen {handle.generation}"
        try:
            self._ecs.stop_task(cluster=self._config.cluster, task=handle.ref, reason=reason)
        except ClientError as error:
            if error_code(error) == "InvalidParameterException" and "not found" in error_message(
                error
            ):
                log.info("sandbox task already gone", extra={"taskArn": handle.ref})
                return
            raise SandboxError(f"ECS StopTask failed: {error_message(error)}") from None
        log.info("sandbox task stopping", extra={"taskArn": handle.ref})

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


def _check_session_id(session_id: str) -> None:
    # used in EFS paths, S3 keys and task definition families: no "/" or ".." may slip in
    if not _SESSION_ID.match(session_id):
        raise SandboxError("session id must be 1-64 letters, digits, '-' or '_'")


def _failure_text(failure: Mapping[str, Any]) -> str:
    text = str(failure.get("reason") or "unknown reason")
    if failure.get("detail"):
        text += f" ({failure['detail']})"
    return text


def _is_capacity(failure: Mapping[str, Any]) -> bool:
    text = f"{failure.get('reason') or ''} {failure.get('detail') or ''}".lower()
    return any(reason in text for reason in _CAPACITY_REASONS)


def _redact(text: str, token: str) -> str:
    return text.replace(token, "[redacted]")
