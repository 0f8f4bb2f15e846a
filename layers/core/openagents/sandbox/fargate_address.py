"""Where a Fargate sandbox answers now: its task's private IPv4 address, asked of ECS
(``DescribeTasks``) rather than read off the session record, for the preview gateway.

A session record's endpoint is what provisioning saw; the gateway serves many requests per
sandbox and must never carry one to an address a stopped task gave back (another session's
task may have it next: sandboxd would refuse the token, but nothing should be sent there).
Answers are kept ``ttl`` seconds per task, so a page's burst of requests costs one call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from openagents.sandbox.fargate_storage import attachment_detail, error_message
from openagents.sandbox.port import SandboxError, SandboxHandle

KEPT = 4096  # tasks remembered at most (a dict, dropped whole when full)


class TaskAddresses:
    def __init__(
        self,
        ecs: Any,
        cluster: str,
        port: int,
        ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ecs, self._cluster, self._port = ecs, cluster, port
        self._ttl, self._clock = ttl, clock
        self._kept: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def endpoint(self, handle: SandboxHandle) -> str:
        """``http://<private IP>:<sandboxd port>`` of the handle's running task; SandboxError
        (no status: unreachable) when the task is gone, stopping or has no address yet."""
        now = self._clock()
        with self._lock:
            kept = self._kept.get(handle.ref)
        if kept is not None and now - kept[0] < self._ttl:
            return kept[1]
        address = self._describe(handle.ref)
        endpoint = f"http://{address}:{self._port}"
        with self._lock:
            if len(self._kept) >= KEPT:
                self._kept.clear()
            self._kept[handle.ref] = (now, endpoint)
        return endpoint

    def _describe(self, task_arn: str) -> str:
        try:
            answer = self._ecs.describe_tasks(cluster=self._cluster, tasks=[task_arn])
        except ClientError as error:
            raise SandboxError(f"ECS DescribeTasks failed: {error_message(error)}") from None
        tasks = answer.get("tasks") or []
        if not tasks:
            raise SandboxError("the sandbox's task is gone")
        task = tasks[0]
        if task.get("lastStatus") != "RUNNING" or task.get("desiredStatus") == "STOPPED":
            raise SandboxError(f"the sandbox's task is {str(task.get('lastStatus')).lower()}")
        address = attachment_detail(task, "ElasticNetworkInterface", "privateIPv4Address")
        if address is None:
            raise SandboxError("the sandbox's task has no private address yet")
        return address
