"""At scale on AWS (issue 27): every AWS request of a session-day, counted on the adapters, and
the rates each quota sees at N = 100, 1,000 and 10,000 concurrent sessions.

Measured here (botocore: every request of every client, boto3's and PynamoDB's, with its
parameters): the API's operations through the Lambda handler on moto (as ``bench.requests``);
the provisioning workflow's steps on the DynamoDB store (moto) with the real Fargate driver,
ECS answered by Stubber and EC2 by moto; the driver's hibernate (EBS snapshot), stop and
snapshot delete; the state transitions of the two ASL files walked along a session's path.
DynamoDB write units come from the written items' sizes (1 WCU per KB, transactions twice).
Derived (printed as such): the day's script (how many turns, polls, hibernations), and from it
the rates per second at N sessions, against each quota's default (docs/scale.md names them).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import environment, fresh_settings, moto_server, say, scratch

ROOT = Path(__file__).resolve().parent.parent
SIZES = (100, 1_000, 10_000)

# The day of one session (derived: an engineer's working day with the agent). Turns: the
# published per-task figures for coding agents are 10-30 model steps per task; a session
# runs a handful of tasks a day.
DAY = {
    "turns": 20,  # user messages that start an agent turn
    "steps_per_turn": 15,  # model steps per turn (tool calls between them)
    "turn_seconds": 90,  # one turn's wall time
    "status_polls": 120,  # the SPA's status polls while the session is open (one a minute... 2 h)
    "hibernations": 2,  # idle -> hibernate -> resume, twice a day
    "probes": 4,  # CheckSandbox rounds until sandboxd answers (Fargate start ~40 s)
    "evaluations": 6,  # lifecycle wake-ups per active stretch (activity pushed hibernateAfter)
}
WORKDAY_SECONDS = 8 * 3600
BURST_SECONDS = 600  # the 9 o'clock burst: every session starts or resumes in 10 minutes


@dataclass(frozen=True)
class Quota:
    key: str
    name: str  # the Service Quotas name (or the documented limit)
    default: float | None  # None: set per account (the Service Quotas console shows it)
    unit: str
    adjustable: bool
    source: str  # the AWS page that states the default ("unconfirmed": none found)


# Each default as AWS documents it (docs/scale.md "The quotas a session meets" cites the same).
QUOTAS = (
    Quota("fargate_vcpu", "Fargate On-Demand vCPU resource count", 6, "vCPU", True,
          "AWS Batch API Reference, ResourceRequirement (the default is 6 vCPUs); Amazon ECS "
          "service quotas (new accounts may start lower, raised with usage)"),
    Quota("fargate_launch", "Fargate On-Demand task launch rate (sustained; burst 100)", 20,
          "tasks/s", False, "AWS Fargate throttling quotas (Amazon ECS Developer Guide)"),
    Quota("runtask", "ECS RunTask API rate on Fargate (burst and sustained)", 20, "req/s", False,
          "AWS Fargate throttling quotas (Amazon ECS Developer Guide)"),
    Quota("eni", "Network interfaces per Region", 5_000, "ENIs", True,
          "Amazon VPC quotas (VPC User Guide)"),
    Quota("subnet_ips", "the stack's sandbox subnets (sandboxSubnetMask=20 x 2 AZs)", 8_118,
          "addresses", True, "infra/config.py (a stack setting, not an AWS quota)"),
    Quota("ebs_snapshot_rate", "EBS CreateSnapshot request rate per account (unconfirmed)", 5,
          "req/s", False, "unconfirmed: no EBS or EC2 throttling page found states it"),
    Quota("sfn_start", "Step Functions StartExecution, Standard (us-east-1; bucket 1,300)", 300,
          "req/s", True, "Quotas for Standard Workflows / Step Functions service quotas "
          "(Step Functions Developer Guide)"),
    Quota("sfn_transitions", "Step Functions StateTransition, Standard (us-east-1; bucket 5,000)",
          1_500, "transitions/s", True, "Quotas for Standard Workflows / Step Functions service "
          "quotas (new accounts have reduced state transition quotas)"),
    Quota("sfn_open", "Step Functions maximum open executions per account", 1_000_000,
          "executions", True, "Step Functions service quotas (Step Functions Developer Guide)"),
    Quota("lambda_concurrency", "Lambda concurrent executions per Region", 1_000, "executions",
          True, "Lambda quotas (Lambda Developer Guide; new accounts have reduced concurrency)"),
    Quota("apigw", "API Gateway throttle quota per account, per Region (HTTP, REST, WebSocket)",
          10_000, "req/s", True, "Amazon API Gateway quotas and important notes"),
    Quota("partition_wcu", "DynamoDB write throughput per partition", 1_000, "WCU/s", False,
          "Understanding DynamoDB warm throughput in different scenarios (DynamoDB Developer "
          "Guide: 1,000 write and 3,000 read units per second per partition)"),
    Quota("bedrock_tpm", "Bedrock On-demand InvokeModel tokens per minute for ${model}", None,
          "tokens/min", True, "Quotas for the bedrock-runtime endpoint (Bedrock User Guide)"),
    Quota("bedrock_rpm", "Bedrock requests per minute for ${model} (no longer enforced)", None,
          "req/min", True, "Quotas for the bedrock-runtime endpoint: RPM quotas are no longer "
          "enforced there; throttling is by tokens"),
)  # fmt: skip
# a model step's tokens (published figures for coding agents: the context grows to tens of
# thousands of tokens, most of it a prompt-cache hit; a few hundred output tokens a step)
STEP_TOKENS = {"input": 3_000, "cache_read": 27_000, "output": 500}


# ------------------------------------------------------------------ the recorder


@dataclass
class Call:
    api: str  # service:Operation
    partitions: tuple[tuple[str, float], ...]  # (pk, write units) of a DynamoDB write


_calls: contextvars.ContextVar[list[Call] | None] = contextvars.ContextVar(
    "scale_calls", default=None
)


def install_recorder() -> None:
    """Record every AWS request made while ``recording()`` is on (botocore's one path for
    every client, PynamoDB's included), with the write units per partition of a write."""
    from botocore.client import BaseClient

    original = getattr(BaseClient, "_make_api_call")  # noqa: B009 - private, untyped
    if getattr(original, "_scale_recorder", False):
        return

    def recorded(self: Any, operation_name: str, api_params: Any) -> Any:
        calls = _calls.get()
        if calls is not None:
            service = self.meta.service_model.service_name
            calls.append(Call(f"{service}:{operation_name}", _units(operation_name, api_params)))
        return original(self, operation_name, api_params)

    recorded._scale_recorder = True  # type: ignore[attr-defined]
    setattr(BaseClient, "_make_api_call", recorded)  # noqa: B010 - private, untyped


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def _pk(key: Any) -> str:
    pk = (key or {}).get("pk", {})
    return str(pk.get("S", "?")) if isinstance(pk, dict) else str(pk)


def _units(operation: str, params: Any) -> tuple[tuple[str, float], ...]:
    """Write units per partition: 1 per KB of the item written (an update: of its changes,
    at least 1 — the item's own size is added in ``_session_item_kb``); x2 in a transaction."""
    if operation == "PutItem":
        return ((_pk(params.get("Item")), math.ceil(_size(params.get("Item")) / 1024)),)
    if operation in ("UpdateItem", "DeleteItem"):
        return ((_pk(params.get("Key")), float(max(1, math.ceil(_size(params) / 1024)))),)
    if operation == "TransactWriteItems":
        found = []
        for item in params.get("TransactItems", []):
            for kind, body in item.items():
                if kind == "ConditionCheck":
                    continue
                key = body.get("Item") or body.get("Key")
                found.append((_pk(key), 2.0 * max(1, math.ceil(_size(body) / 1024))))
        return tuple(found)
    if operation == "BatchWriteItem":
        return tuple(
            (_pk(r.get("PutRequest", {}).get("Item") or r.get("DeleteRequest", {}).get("Key")), 1.0)
            for requests in params.get("RequestItems", {}).values()
            for r in requests
        )
    return ()


@contextlib.contextmanager
def recording() -> Iterator[list[Call]]:
    calls: list[Call] = []
    token = _calls.set(calls)
    try:
        yield calls
    finally:
        _calls.reset(token)


def summarise(calls: list[Call]) -> dict[str, Any]:
    apis = Counter(call.api for call in calls)
    units: dict[str, float] = defaultdict(float)
    for call in calls:
        for pk, wcu in call.partitions:
            units[_key_kind(pk)] += wcu
    return {"calls": dict(sorted(apis.items())), "wcu": dict(sorted(units.items()))}


def _key_kind(pk: str) -> str:
    """``S#sess_abc`` -> ``S#<session>``: which kind of partition (docs/store.md's keys)."""
    head, _, rest = pk.partition("#")
    if not rest:
        return head
    if head == "RLIVE":
        return "RLIVE#<shard>"
    names = {"S": "<session>", "C": "<session>#<chat>", "U": "<user>", "REV": "<run>",
             "RUN": "<run>", "RSESS": "<session>", "RCHAT": "<session>#<chat>",
             "RMSG": "<session>#<chat>#<message>", "CID": "<user>#<chat>",
             "MID": "<user>#<message>"}  # fmt: skip
    return f"{head}#{names.get(head, '<id>')}"


def measure(call: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    with recording() as calls:
        reply = call()
    return reply, summarise(calls)


# ------------------------------------------------------------------ phase 1: the API


def _api_operations(settings: Any, endpoint: str) -> dict[str, dict[str, Any]]:
    from bench.requests import _lambda_api, _message, _ok

    api = _lambda_api(settings, endpoint)
    api.get("/api/sessions", user="warmup")
    found: dict[str, dict[str, Any]] = {}
    reply, found["api: create session"] = measure(
        lambda: api.post("/api/sessions", {"title": "counted"})
    )
    created = _ok(reply, 201)
    sid, chat = created["session"]["id"], created["chat"]["id"]
    _, found["api: status poll"] = measure(
        lambda: api.get("/api/sandbox/status", query={"sessionId": sid})
    )
    messages = f"/api/sessions/{sid}/chats/{chat}/messages"
    _, found["api: post message (user)"] = measure(lambda: api.post(messages, _message("user", 1)))
    _, found["api: upsert message (assistant step)"] = measure(
        lambda: api.post(messages, _message("assistant", 1))
    )
    _, found["api: get session"] = measure(lambda: api.get(f"/api/sessions/{sid}"))
    _, found["api: list sessions"] = measure(lambda: api.get("/api/sessions"))
    return found


# ------------------------------------------------------------------ phase 2: the workflows' tasks


def _workflow_operations(home: Path) -> dict[str, dict[str, Any]]:
    """The provisioning steps on the DynamoDB store with the Fargate driver (ECS by Stubber,
    EC2 by moto), then the driver's hibernate (sync + EBS snapshot), stop, resume start and
    snapshot delete."""
    import uuid

    from botocore.stub import Stubber
    from moto import mock_aws
    from openagents.artifacts.folder import FolderArtifactStore
    from openagents.domain.models import LifecycleState
    from openagents.sandbox.fargate import FargateDriver
    from openagents.services.provisioning import ProvisioningService
    from openagents.settings import Settings
    from openagents.store import items
    from openagents.store.dynamodb import DynamoStore

    from tests.unit.test_fargate_driver import (
        BOTO,
        TASK_ARN,
        FakeSandboxd,
        _ebs_attachment,
        make_config,
        run_task_ok,
        task,
    )

    found: dict[str, dict[str, Any]] = {}
    with mock_aws():
        table = f"scale-{uuid.uuid4().hex[:8]}"
        settings = Settings(
            home=home,
            store="dynamodb",
            table_name=table,
            region="us-east-1",
            provision_on_create=False,
            rate_limit_per_minute=100_000,
        )
        items.bind(table, None, "us-east-1")
        items.create_table()
        store = DynamoStore(FolderArtifactStore(home / "artifacts"), settings.inline_message_bytes)
        ecs, ec2 = BOTO.client("ecs"), BOTO.client("ec2")
        events: list[str] = []
        sandboxd = FakeSandboxd(events)
        sandboxd.prepare_workspace = lambda **_: {"branch": "main"}  # type: ignore[attr-defined]
        driver = FargateDriver(
            make_config(), ecs, ec2, BOTO.client("efs"), BOTO.client("s3"), lambda e, t: sandboxd
        )

        class Quiet:
            def count(self, name: str, value: int = 1) -> None:
                pass

        class NoWorkflows:
            def start(self, machine: str, name: str, payload: dict[str, Any]) -> bool:
                return True

        from datetime import UTC, datetime

        service = ProvisioningService(
            store,
            driver,
            NoWorkflows(),
            lambda handle: sandboxd,
            settings,
            lambda: datetime.now(UTC),
            lambda: uuid.uuid4().hex,
            Quiet(),
        )
        session = _seed_session(settings)
        stub = Stubber(ecs)
        stub.activate()
        volume = ec2.create_volume(AvailabilityZone="us-east-1a", Size=20)["VolumeId"]
        running = task("RUNNING", attachments=[*task("RUNNING")["attachments"][:1],
                                               _ebs_attachment(volume)])  # fmt: skip
        stub.add_response("run_task", run_task_ok())
        _, found["step: StartSandbox"] = measure(lambda: service.start(session, 1))
        stub.add_response("describe_tasks", {"tasks": [task("PROVISIONING", attachments=[])]})
        _, found["step: CheckSandbox (starting)"] = measure(lambda: service.probe(session, 1, 0))
        stub.add_response("describe_tasks", {"tasks": [running]})
        _, found["step: CheckSandbox (ready)"] = measure(lambda: service.probe(session, 1, 1))
        _, found["step: PrepareWorkspace"] = measure(lambda: service.prepare(session, 1))
        _, found["step: MarkActive"] = measure(lambda: service.activate(session, 1))
        current = store.get_session(session)
        assert current is not None
        assert current.lifecycle_state is LifecycleState.ACTIVE
        handle = current.sandbox
        assert handle is not None
        stub.add_response("describe_tasks", {"tasks": [running]})
        ref, found["driver: hibernate snapshot (EBS)"] = measure(lambda: driver.snapshot(handle))
        stub.add_response("stop_task", {"task": task("STOPPING")})
        _, found["driver: stop"] = measure(lambda: driver.stop(handle))
        stub.add_response("run_task", run_task_ok(TASK_ARN))
        _, found["driver: resume start (from snapshot)"] = measure(
            lambda: driver.start(current.id, 2, from_snapshot=ref)
        )
        _, found["driver: delete snapshot (archive)"] = measure(lambda: driver.delete_snapshot(ref))
        stub.assert_no_pending_responses()
        session_item_kb = math.ceil(
            _size(BOTO.client("dynamodb").get_item(
                TableName=table, Key={"pk": {"S": f"S#{session}"}, "sk": {"S": "SESSION"}}
            )["Item"]) / 1024
        )  # fmt: skip
        found["_session_item_kb"] = {"calls": {}, "wcu": {"S#<session>": session_item_kb}}
    return found


def _seed_session(settings: Any) -> str:
    """A session as the API writes it (phase 1 counted that write)."""
    from openagents.composition import build
    from openagents.domain.identity import Identity
    from openagents.services.sessions import NewSession

    class Quiet:
        def count(self, name: str, value: int = 1) -> None:
            pass

    container = build(settings, Quiet())
    return container.sessions.create(Identity(user_id="u1", username="u1"), NewSession())[0].id


# ------------------------------------------------------------------ phase 3: state transitions


def transitions() -> dict[str, int]:
    """State transitions along a session's path, walked on the ASL files: a provisioning run
    with ``probes`` checks (each round: Wait, Task, Choice), a lifecycle run with
    ``evaluations`` wake-ups then a hibernate (each wake-up: Wait, Task, Choice)."""
    asl = ROOT / "infra" / "statemachines"
    provisioning = json.loads((asl / "provisioning.asl.json").read_text())["States"]
    lifecycle = json.loads((asl / "lifecycle.asl.json").read_text())["States"]
    assert {"StartSandbox", "WaitForSandbox", "CheckSandbox", "SandboxReady?"} <= set(provisioning)
    assert {"Claim", "Route", "Sleep", "Evaluate", "Hibernate", "Done"} <= set(lifecycle)
    probes, wakes = DAY["probes"], DAY["evaluations"]
    provision = (
        1 + probes * 3 + 2 + 1
    )  # Start; (Wait, Check, Choice) x probes; Prepare, Active; end
    # Claim, Route; (Sleep, Evaluate, Route) x wakes; Hibernate, Route, Done
    loop = 2 + wakes * 3 + 3
    return {"provisioning run": provision, "lifecycle run": loop}


# ------------------------------------------------------------------ the model


def session_day(ops: dict[str, dict[str, Any]], steps: dict[str, int]) -> dict[str, Any]:
    """The day's requests of one session: the measured operations times the day's script."""
    d = DAY
    runs = 1 + d["hibernations"]  # the first start, then each resume
    script = {
        "api: create session": 1,
        "api: status poll": d["status_polls"],
        "api: post message (user)": d["turns"],
        "api: upsert message (assistant step)": d["turns"] * d["steps_per_turn"],
        "api: get session": d["turns"],
        "api: list sessions": 4,
        "step: StartSandbox": 1,
        "step: CheckSandbox (starting)": runs * (d["probes"] - 1),
        "step: CheckSandbox (ready)": runs,
        "step: PrepareWorkspace": 1,
        "step: MarkActive": runs,
        "driver: hibernate snapshot (EBS)": d["hibernations"],
        "driver: stop": d["hibernations"] + 1,
        "driver: resume start (from snapshot)": d["hibernations"],
        "driver: delete snapshot (archive)": 1,
    }
    calls: Counter[str] = Counter()
    wcu: Counter[str] = Counter()
    for name, times in script.items():
        for api, n in ops[name]["calls"].items():
            calls[api] += n * times
        for key, units in ops[name]["wcu"].items():
            wcu[key] += units * times
    calls["states:StartExecution"] += runs * 2  # a provisioning and a lifecycle run each
    sfn = runs * (steps["provisioning run"] + steps["lifecycle run"])
    return {
        "script": script,
        "calls": dict(sorted(calls.items())),
        "wcu": dict(sorted(wcu.items())),
        "stateTransitions": sfn,
        "starts": runs,
    }


def rates(day: dict[str, Any], n: int, cpu: float = 2.0) -> dict[str, float]:
    """What each quota sees at ``n`` concurrent active sessions (derived from the day)."""
    starts_burst = n / BURST_SECONDS  # everyone starts in the 10-minute burst
    turning = n * DAY["turns"] * DAY["turn_seconds"] / WORKDAY_SECONDS  # turns in flight
    api_calls = sum(v for k, v in day["calls"].items() if k.startswith("dynamodb:")) / 2
    return {
        "fargate_vcpu": n * cpu,
        "fargate_launch": starts_burst,
        "runtask": starts_burst,
        "eni": n,
        "subnet_ips": n,
        "ebs_snapshot_rate": n * DAY["hibernations"] / WORKDAY_SECONDS * 4,  # lunch: 4x average
        "sfn_start": 2 * starts_burst,
        "sfn_transitions": n * day["stateTransitions"] / WORKDAY_SECONDS
        + starts_burst * transitions()["provisioning run"] / 10,
        "sfn_open": n * 2,
        "lambda_concurrency": turning + n * 0.02,  # agent turns in flight + API/task functions
        "apigw": n * api_calls / WORKDAY_SECONDS * 3,  # the busy hour: 3x average
        "partition_wcu": hot_keys(day, n)["worst"],
        "bedrock_tpm": turning
        * DAY["steps_per_turn"]
        * sum(STEP_TOKENS.values())
        / (DAY["turn_seconds"] / 60),
        "bedrock_rpm": turning * DAY["steps_per_turn"] / (DAY["turn_seconds"] / 60),
    }


def hot_keys(day: dict[str, Any], n: int) -> dict[str, Any]:
    """Peak writes/s per partition key at ``n`` sessions. A session's own keys see one turn at
    a time (its units per turn over the turn's time); shared keys (the live-run shards, the
    reconciler's due shards) see every session's writes spread over their shards."""
    per_turn_seconds = DAY["turn_seconds"]
    peak: dict[str, float] = {}
    for key, units in day["wcu"].items():
        per_day = units
        if key.startswith(("S#", "C#", "REV#", "RUN#", "RCHAT#")):
            # a session's keys: the day's units fall in its turns
            peak[key] = per_day / (DAY["turns"] * per_turn_seconds)
        elif key.startswith("U#"):
            peak[key] = per_day / (DAY["turns"] * per_turn_seconds)  # one user, one session
        else:
            peak[key] = per_day / WORKDAY_SECONDS
    # the stream of a model step: its events are flushed every 0.2 s (agent/stream.py)
    peak["REV#<run> (stream flush, 0.2 s)"] = 5.0
    turns_per_second = n * DAY["turns"] / WORKDAY_SECONDS * 3
    peak["RLIVE#<shard> (16 shards)"] = turns_per_second * 2 / 16
    peak["GSI dueShard (8 shards)"] = turns_per_second * DAY["steps_per_turn"] / 8
    worst = max(peak.values())
    return {"peak": {k: round(v, 2) for k, v in sorted(peak.items())}, "worst": worst}


# ------------------------------------------------------------------ the benchmark


def run(args: Any) -> dict[str, Any]:
    install_recorder()
    with (
        moto_server() as moto,
        scratch("scale") as home,
        environment(AWS_ENDPOINT_URL_S3=moto.endpoint),
    ):
        say("scale: the API's operations (Lambda handler, moto)")
        settings = fresh_settings(moto.endpoint, home / "api")
        ops = _api_operations(settings, moto.endpoint)
    with scratch("scale-flow") as home:
        say("scale: the workflows' tasks and the Fargate driver (moto + Stubber)")
        ops.update(_workflow_operations(home))
    steps = transitions()
    day = session_day(ops, steps)
    quotas = {q.key: q for q in QUOTAS}
    at: dict[str, Any] = {}
    for n in SIZES:
        seen = rates(day, n)
        at[str(n)] = {
            key: {
                "rate": round(value, 2),
                "quota": quotas[key].default,
                "over": value > (quotas[key].default or math.inf),
            }
            for key, value in seen.items()
        }
    return {
        "operations": {k: v for k, v in ops.items() if not k.startswith("_")},
        "sessionItemKB": ops["_session_item_kb"]["wcu"]["S#<session>"],
        "transitions": steps,
        "day": DAY,
        "sessionDay": day,
        "atScale": at,
        "hotKeys10k": hot_keys(day, 10_000)["peak"],
        "quotas": {
            q.key: {
                "name": q.name,
                "default": q.default,
                "unit": q.unit,
                "adjustable": q.adjustable,
                "source": q.source,
            }
            for q in QUOTAS
        },
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    table = []
    for name, counts in result["operations"].items():
        calls = ", ".join(f"{k} {n}" for k, n in counts["calls"].items())
        table.append([f"scale: {name}", f"{sum(counts['calls'].values())} req", calls])
    day = result["sessionDay"]
    total = sum(day["calls"].values())
    table.append([
        "scale: session-day", f"{total} req",
        ", ".join(f"{k} {n}" for k, n in day["calls"].items()),
    ])  # fmt: skip
    table.append([
        "scale: session-day WCU", f"{round(sum(day['wcu'].values()))} WCU",
        ", ".join(f"{k} {round(v)}" for k, v in day["wcu"].items()),
    ])  # fmt: skip
    table.append(["scale: state transitions", f"{day['stateTransitions']}/day",
                  json.dumps(result["transitions"])])  # fmt: skip
    names = result["quotas"]
    for n, seen in result["atScale"].items():
        over = [k for k, v in seen.items() if v["over"]]
        detail = "; ".join(
            f"{k} {v['rate']:g}/{'account' if v['quota'] is None else format(v['quota'], 'g')}"
            for k, v in seen.items()
        )
        flag = ("OVER: " + ", ".join(names[k]["name"] for k in over)) if over else "all within"
        table.append([f"scale: N={n}", flag, detail])
    hot = result["hotKeys10k"]
    worst = max(hot, key=lambda k: hot[k])
    table.append(["scale: hot key @10k", f"{hot[worst]:g} WCU/s", f"{worst} (of 1000/partition)"])
    return table
