"""Provisioning at the capacity limit (issue 27): when ECS throttles RunTask or the account's
Fargate vCPU quota is full, a start waits and retries (the ASL's ``WaitingForCapacity`` retry)
instead of failing the session; the user reads "waiting for capacity"; every session starts
exactly once when room appears, none is lost.

The world: the provisioning service with the real Fargate driver, its ECS answers injected with
Stubber (ThrottlingException, "You've reached the limit on the number of vCPUs"), the SQLite
store, and a controllable clock driving the workflow's retry schedule read from the ASL file.
"""

from __future__ import annotations

import heapq
import json
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber
from moto import mock_aws
from openagents.composition import build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState
from openagents.sandbox.errors import CAPACITY
from openagents.sandbox.fargate import FargateDriver, run_task_client_token
from openagents.sandbox.port import Sandboxd, SandboxError, SandboxHandle
from openagents.services.provisioning import (
    WAITING_FOR_CAPACITY,
    ProvisioningService,
    WaitingForCapacity,
)
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from openagents.store.sqlite import SqliteStore
from openagents.workflows import TaskError

from tests.unit.test_fargate_driver import BOTO, make_config, run_task_ok

ALICE = Identity(user_id="alice", username="alice")
VCPU_LIMIT = (
    "You've reached the limit on the number of vCPUs you can run concurrently. For more "
    "information see the troubleshooting section of the Amazon ECS Developer Guide."
)


def capacity_retry() -> dict[str, Any]:
    asl = Path(__file__).resolve().parents[2] / "infra" / "statemachines"
    definition = json.loads((asl / "provisioning.asl.json").read_text())
    retries = definition["States"]["StartSandbox"]["Retry"]
    matching = [r for r in retries if WaitingForCapacity.__name__ in r["ErrorEquals"]]
    assert len(matching) == 1
    assert retries[0] is matching[0], "the capacity retry must come before the catch-alls"
    return dict(matching[0])


def retry_delay(rule: dict[str, Any], attempt: int, rng: random.Random) -> float:
    """Step Functions' delay before retry ``attempt`` (0-based): interval x rate^attempt,
    capped at MaxDelaySeconds, FULL jitter drawing in [0, that]."""
    delay = min(
        rule["IntervalSeconds"] * rule["BackoffRate"] ** attempt,
        rule.get("MaxDelaySeconds", float("inf")),
    )
    return rng.uniform(0, delay) if rule.get("JitterStrategy") == "FULL" else delay


class Counted:
    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.names[name] += value


class NoWorkflows:
    def start(self, machine: str, name: str, payload: dict[str, Any]) -> bool:
        raise AssertionError("the start step starts no workflow")


@dataclass
class World:
    service: ProvisioningService
    store: SqliteStore
    ecs: Stubber
    metrics: Counted
    now: list[datetime]
    tokens: list[str] = field(default_factory=list)  # RunTask client tokens, in call order

    def clock(self) -> datetime:
        return self.now[0]


@pytest.fixture
def world(settings: Settings) -> Iterator[World]:
    with mock_aws():
        ecs = BOTO.client("ecs")
        tokens: list[str] = []

        def record(params: dict[str, Any], **_: Any) -> None:
            tokens.append(str(params["clientToken"]))

        ecs.meta.events.register("before-parameter-build.ecs.RunTask", record)

        def no_sandboxd(endpoint: str, token: str) -> Sandboxd:
            raise AssertionError("the start step never calls sandboxd")

        driver = FargateDriver(
            make_config(),
            ecs,
            BOTO.client("ec2"),
            BOTO.client("efs"),
            BOTO.client("s3"),
            no_sandboxd,
        )
        store = SqliteStore(settings.sqlite_path, None, settings.inline_message_bytes)  # type: ignore[arg-type]
        metrics = Counted()
        now = [datetime(2026, 1, 5, 9, 0, tzinfo=UTC)]

        def sandboxd(handle: SandboxHandle) -> Sandboxd:
            raise AssertionError("the start step never prepares a workspace")

        service = ProvisioningService(
            store,
            driver,
            NoWorkflows(),
            sandboxd,
            settings,
            lambda: now[0],
            lambda: uuid.uuid4().hex,
            metrics,
        )
        stubber = Stubber(ecs)
        stubber.activate()
        yield World(service, store, stubber, metrics, now, tokens)
        stubber.assert_no_pending_responses()


def new_sessions(settings: Settings, n: int) -> list[str]:
    container = build(settings, Counted())
    return [container.sessions.create(ALICE, NewSession())[0].id for _ in range(n)]


def task_arn(session_id: str) -> str:
    return f"arn:aws:ecs:us-east-1:123456789012:task/sandboxes/{session_id}"


# -- the driver tells capacity from faults -------------------------------------------------------


def test_throttling_and_the_vcpu_limit_are_capacity_other_failures_are_not(world: World) -> None:
    driver = world.service._driver
    world.ecs.add_client_error("run_task", "ThrottlingException", "Rate exceeded", 400)
    world.ecs.add_response(
        "run_task", {"tasks": [], "failures": [{"arn": "x", "reason": VCPU_LIMIT}]}
    )
    world.ecs.add_response(
        "run_task", {"tasks": [], "failures": [{"arn": "x", "reason": "MISSING"}]}
    )
    world.ecs.add_client_error("run_task", "InvalidParameterException", "bad subnet", 400)
    codes = []
    for _ in range(4):
        with pytest.raises(SandboxError) as raised:
            driver.start("sess_x", 1)
        codes.append(raised.value.code)
    assert codes == [CAPACITY, CAPACITY, None, None]


# -- the service waits, says so once, and starts once ---------------------------------------------


def test_a_refused_start_waits_says_so_once_and_then_starts(
    world: World, settings: Settings
) -> None:
    (sid,) = new_sessions(settings, 1)
    world.ecs.add_client_error("run_task", "ThrottlingException", "Rate exceeded", 400)
    world.ecs.add_response(
        "run_task", {"tasks": [], "failures": [{"arn": "x", "reason": VCPU_LIMIT}]}
    )
    world.ecs.add_response("run_task", run_task_ok(task_arn(sid)))

    for _ in range(2):
        with pytest.raises(WaitingForCapacity):
            world.service.start(sid, 1)
        waiting = world.store.get_session(sid)
        assert waiting is not None
        assert waiting.lifecycle_state is LifecycleState.PROVISIONING
        assert waiting.lifecycle_error == WAITING_FOR_CAPACITY
        assert waiting.sandbox is None
    started = world.service.start(sid, 1)

    assert started.started
    assert not started.retry
    session = world.store.get_session(sid)
    assert session is not None
    assert session.lifecycle_error is None
    assert session.sandbox is not None
    assert session.sandbox.ref == task_arn(sid)
    kinds = [e.type for e in world.store.list_events(sid, 50, None).items]
    assert kinds.count("sandbox.waiting") == 1  # the second refusal wrote nothing
    assert kinds.count("sandbox.starting") == 1
    # one client token throughout: a start that landed unseen is found, never doubled
    assert world.tokens == [run_task_client_token(sid, 1)] * 3
    assert world.metrics.names["SandboxCapacityWait"] == 2
    # and a retried start step after it landed starts nothing more
    assert world.service.start(sid, 1).retry


def test_a_session_archived_while_waiting_stops_waiting(world: World, settings: Settings) -> None:
    (sid,) = new_sessions(settings, 1)
    session = world.store.get_session(sid)
    assert session is not None
    world.ecs.add_client_error("run_task", "ThrottlingException", "Rate exceeded", 400)
    with pytest.raises(WaitingForCapacity):
        world.service.start(sid, 1)
    world.store.transition(
        sid,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes={"lifecycle_state": LifecycleState.FAILED},
        entry=None,
    )
    assert not world.service.start(sid, 1).started  # no RunTask: nothing pending on the stub


def test_when_the_wait_runs_out_the_session_fails_with_a_readable_reason(
    world: World, settings: Settings
) -> None:
    (sid,) = new_sessions(settings, 1)
    world.ecs.add_client_error("run_task", "ThrottlingException", "Rate exceeded", 400)
    with pytest.raises(WaitingForCapacity) as raised:
        world.service.start(sid, 1)
    cause = json.dumps({"errorType": "WaitingForCapacity", "errorMessage": str(raised.value)})
    settled = world.service.fail(sid, 1, TaskError(Error="WaitingForCapacity", Cause=cause))
    assert settled.state == "failed"
    session = world.store.get_session(sid)
    assert session is not None
    assert (session.lifecycle_error or "").startswith("Provisioning failed")


# -- the queue at the limit: 40 sessions, room for 8, a RunTask bucket of 5 -------------------


def test_forty_sessions_at_the_limit_drain_each_started_exactly_once(
    world: World, settings: Settings
) -> None:
    rule = capacity_retry()
    # Given the ASL's retry waits long enough for a quota to free up (mean wait >= 30 min)
    capped = (
        min(rule["IntervalSeconds"] * rule["BackoffRate"] ** a, rule["MaxDelaySeconds"])
        for a in range(rule["MaxAttempts"])
    )
    mean_total = sum(capped) / 2  # FULL jitter: half the capped delay on average
    assert mean_total >= 30 * 60
    sessions = new_sessions(settings, 40)
    quota = 8  # running sandboxes the vCPU quota admits
    bucket_size, refill_every = 5.0, 1.0  # RunTask tokens: burst 5, one per second
    run_for = timedelta(minutes=3)  # a sandbox runs 3 minutes, then hibernates (frees its vCPUs)
    rng = random.Random(27)  # noqa: S311 - a seeded jitter, not a secret
    start = world.clock()
    bucket, refilled_at = bucket_size, start
    running: list[datetime] = []  # when each running sandbox stops
    started_at: dict[str, datetime] = {}
    first_refused: dict[str, datetime] = {}
    # every execution's StartSandbox at t=0, in creation order
    due: list[tuple[datetime, int, str, int]] = [
        (start, i, sid, 0) for i, sid in enumerate(sessions)
    ]
    heapq.heapify(due)
    seq = len(due)
    injected: Counter[str] = Counter()
    while due:
        at, _, sid, attempt = heapq.heappop(due)
        world.now[0] = at
        elapsed = (at - refilled_at).total_seconds()
        bucket = min(bucket_size, bucket + elapsed / refill_every)
        refilled_at = at
        running = [stop for stop in running if stop > at]
        # ECS's answer, injected: throttled, vCPU quota full, or the task
        if bucket < 1:
            injected["throttled"] += 1
            world.ecs.add_client_error("run_task", "ThrottlingException", "Rate exceeded", 400)
        else:
            bucket -= 1
            if len(running) >= quota:
                injected["vcpu limit"] += 1
                failure = {"arn": "x", "reason": VCPU_LIMIT}
                world.ecs.add_response("run_task", {"tasks": [], "failures": [failure]})
            else:
                world.ecs.add_response("run_task", run_task_ok(task_arn(sid)))
                running.append(at + run_for)
        try:
            world.service.start(sid, 1)
        except WaitingForCapacity:
            first_refused.setdefault(sid, at)
            assert attempt < rule["MaxAttempts"], f"{sid} ran out of attempts"
            retry_at = at + timedelta(seconds=retry_delay(rule, attempt, rng))
            heapq.heappush(due, (retry_at, seq, sid, attempt + 1))
            seq += 1
            continue
        assert sid not in started_at, f"{sid} started twice"
        started_at[sid] = at
    world.ecs.assert_no_pending_responses()

    assert injected["throttled"] > 0
    assert injected["vcpu limit"] > 0
    # Then every session started, exactly once, nothing failed and nothing is still waiting
    assert set(started_at) == set(sessions)
    assert len(first_refused) >= len(sessions) - quota  # most had to wait
    for sid in sessions:
        session = world.store.get_session(sid)
        assert session is not None
        assert session.lifecycle_state is LifecycleState.PROVISIONING  # next: probe, prepare
        assert session.lifecycle_error is None
        assert session.sandbox is not None
        assert session.sandbox.ref == task_arn(sid)
        kinds = [e.type for e in world.store.list_events(sid, 100, None).items]
        assert kinds.count("sandbox.starting") == 1
        assert kinds.count("sandbox.waiting") == (1 if sid in first_refused else 0)
    # each session's RunTask calls all carried its one client token
    assert set(world.tokens) == {run_task_client_token(sid, 1) for sid in sessions}
    # And the quota was never exceeded: at most `quota` sandboxes ran at any start
    starts = sorted(started_at.values())
    for moment in starts:
        alive = sum(1 for s in starts if s <= moment < s + run_for)
        assert alive <= quota
    # And the drain took about what the quota allows (40 sessions / 8 at a time x 3 min),
    # plus at most one capped retry interval per wave (the jitter's spread)
    waves = -(-len(sessions) // quota)
    longest = max(starts) - start
    assert longest <= (waves - 1) * run_for + waves * timedelta(seconds=rule["MaxDelaySeconds"])
