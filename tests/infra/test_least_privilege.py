"""Least privilege, proven for every control-plane function (the API, and each Lambda the ASL
files reference): what its code asks AWS for is exactly what its synthesized role allows.

How, offline:

1. **The flow.** The whole system runs in process in AWS mode against the moto server: every API
   route through the API's Lambda handler (with CloudFront's origin header, the GitHub webhook
   signed with its secret), the real provisioning and lifecycle ASL in moto's Step Functions
   with the provisioner and lifecycle handlers in process, real sandboxes from the local driver,
   short timings so sandboxes provision, hibernate twice, resume twice, get lost and are swept
   by the reconciler; a session is archived while hibernated and while active, its
   ``Session Archived`` events delivered to the archiver handler as the rule would, and
   unarchived from its bundle in between. A botocore hook records every AWS call with the
   function it ran for (the handler is wrapped, the thread carries the name), and a proxy
   records which *sandbox driver methods* each function called.
2. **The Fargate driver.** The local driver makes no AWS calls, so each driver method a function
   used is then run on the real ``FargateDriver``, built by ``openagents.composition`` from the
   settings the synthesized template gives the functions (EBS for ``dev``, EFS for ``ext``):
   ECS answers from a ``Stubber`` (moto does not emulate ``volumeConfigurations``), EC2, EFS and
   S3 are the moto server. Those requests are recorded the same way.
3. **IAM.** Each recorded call becomes the IAM requests AWS authorises for it (action, concrete
   resource ARN, condition context: ``ecs:cluster``, ``iam:PassedToService`` for every role a
   RunTask or RegisterTaskDefinition passes, ``ecs:CreateAction``/``ec2:CreateAction`` for
   tag-on-create, the session tags a snapshot request carries) -- the table in
   :func:`iam_requests`. The synthesized template is resolved to concrete ARNs and every
   request must be allowed by some statement of the function's role (and not denied by the
   token key's resource policy), while every statement must allow some request: nothing used
   is missing, nothing granted is unused. The runtime's own statements (its log group, X-Ray,
   the VPC ENIs) are checked separately.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, cast

import boto3
import pytest
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner
from botocore.stub import ANY, Stubber
from openagents import composition
from openagents.agent.loop import AgentLoop
from openagents.agent.models import registry as model_registry
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import LifecycleFields, with_due
from openagents.domain.models import LifecycleState
from openagents.local import stepfunctions as local_stepfunctions
from openagents.sandbox.answers import Health, Restored, SnapshotManifest, Synced
from openagents.sandbox.fargate_efs import access_point_client_token
from openagents.sandbox.fargate_storage import TAG_GENERATION, TAG_SESSION
from openagents.sandbox.port import SandboxHandle, SandboxState, SnapshotRef, sandbox_token
from openagents.settings import Mode, Settings
from openagents.store import items
from openagents.store.dynamodb import DynamoStore
from openagents.store.keys import session_key
from openagents.store.port import StaleState
from openagents.workflows import catalog

from functions.agent import handler as agent_handler
from infra.config import StageConfig
from infra.constructs import agent as agent_construct
from infra.constructs.sandbox import DRIVER_METHODS
from infra.constructs.web import ORIGIN_HEADER
from infra.constructs.workflows import catalog_functions
from tests.bedrock_stub import Bedrock
from tests.infra import iam
from tests.infra.conftest import PROFILE, Synth
from tests.infra.iam import ACCOUNT, REGION, Call, Request, Resolver, Statement
from tests.sandboxd_fake import SandboxdFake
from tests.support import LambdaApi, LambdaContext, Reply, provisioning_runtime

API = "api"
MODEL = f"bedrock/{PROFILE}"  # the model the flow's settings offer
API_HANDLER = "functions.api.handler.lambda_handler"
AGENT = "agent"
STATEMACHINES = Path(__file__).resolve().parents[2] / "infra" / "statemachines"
# The functions the app builds: the API, the durable agent-turn function, and every catalog
# function an ASL file, a schedule or an event rule references
HANDLERS = {
    API: API_HANDLER,
    AGENT: agent_construct.HANDLER,
    **{name: catalog.FUNCTIONS[name] for name in catalog_functions(STATEMACHINES)},
}
BY_HANDLER = {handler: name for name, handler in HANDLERS.items()}
# Per-item actions inside TransactWriteItems / TransactGetItems (IAM has no Transact* actions)
TRANSACT = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
S3_ACTIONS = {
    "HeadObject": "GetObject",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
}
# What the Lambda runtime needs, whatever the code does: checked on their own
RUNTIME_SIDS = {"WriteOwnLogs", "LambdaVpcEni"}
# The durable runtime's own: the SDK's checkpoint calls, which its local runner (the flow's)
# does not make; tests/infra/test_agent.py pins the statement exactly
DURABLE_SIDS = {AGENT: {"DurableCheckpoints"}}
# The API's stop of a turn that does not honour its cancel flag (ListDurableExecutionsByFunction,
# StopDurableExecution): the flow's turns end by themselves, and moto serves no durable
# executions, so tests/infra/test_agent.py pins it exactly. (The start, an asynchronous invoke,
# is in the flow: a Stubber answers it and the turn runs in process.)
AGENT_TURN_SIDS = {"StopAgentTurns"}
# The flow's agent function: a moto-side name for its alias, and the region a cross-region
# inference profile routes the model call to
AGENT_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:agent-turn:live"
PROFILE_DESTINATION = "us-west-2"
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
# Actions that support no resource-level permissions (the only ones allowed on "*")
NO_RESOURCE_LEVEL = {
    "ecs:DescribeTaskDefinition",
    "ecs:RegisterTaskDefinition",
    "ec2:DescribeSnapshots",
    "ec2:DescribeVolumes",
}
SESSION = "sess_least-privilege"
BUILD_DRIVER = composition._driver  # the flow wraps it; the Fargate scenario needs the real one
ALICE = Identity(user_id="alice", username="alice")  # LambdaApi's default caller
ORIGIN_VALUE = "o" * 48  # CloudFront's origin-verify header value (the origin secret)
WEBHOOK_KEY = "w" * 40  # the GitHub webhook's HMAC key
# moto's secret -> the setting the stack names it in (the function's environment)
SECRET_SETTINGS = {
    "secret": "OPENAGENTS_SANDBOX_TOKEN_SECRET_ARN",
    "webhook-secret": "OPENAGENTS_GITHUB_WEBHOOK_SECRET_ARN",
    "github-token": "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN",
    "origin-secret": "OPENAGENTS_ORIGIN_SECRET_ARN",
}


# ------------------------------------------------------------------ the synthesized side


@dataclass
class Function:
    name: str
    logical: str
    role: str  # logical id
    role_arn: str
    log_group: str  # resolved ARN
    statements: list[Statement]
    environment: dict[str, str]


def functions(synth: Synth) -> dict[str, Function]:
    resolve = Resolver(synth.data)
    found: dict[str, Function] = {}
    for name, handler in HANDLERS.items():
        logical, props = synth.function(handler)
        role = props["Role"]["Fn::GetAtt"][0]
        log_group = resolve({"Fn::GetAtt": [props["LoggingConfig"]["LogGroup"]["Ref"], "Arn"]})
        found[name] = Function(
            name=name,
            logical=logical,
            role=role,
            role_arn=resolve({"Fn::GetAtt": [role, "Arn"]}),
            log_group=log_group,
            statements=iam.role_statements(synth.data, role, resolve),
            environment={k: str(resolve(v)) for k, v in props["Environment"]["Variables"].items()},
        )
    return found


def settings_from(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings a function gets on AWS: its synthesized environment, parsed by the app."""
    for name, value in environment.items():
        if name.startswith("OPENAGENTS_"):
            monkeypatch.setenv(name, value)
    settings = Settings()
    for name in environment:
        monkeypatch.delenv(name, raising=False)
    return settings


# ------------------------------------------------------------------ calls -> IAM requests


@dataclass
class Context:
    """What turning calls into IAM requests needs beyond the call's own parameters."""

    cluster_arn: str
    task_definition_roles: list[str]
    volume_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    snapshot_tags: dict[str, dict[str, str]] = field(default_factory=dict)


def _tags(context: dict[str, str], prefix: str) -> dict[str, str]:
    return {f"{prefix}/{key}": value for key, value in context.items()}


# (service, operation) -> the action, on the resource ARN the named parameter holds
ON_PARAMETER = {
    ("stepfunctions", "StartExecution"): ("states:StartExecution", "stateMachineArn"),
    ("secretsmanager", "GetSecretValue"): ("secretsmanager:GetSecretValue", "SecretId"),
}


def iam_requests(call: Call, ctx: Context | None) -> set[Request]:
    """The IAM requests AWS authorises for one SDK call (resources as concrete ARNs)."""
    p, here = call.params, f"{REGION}:{ACCOUNT}"
    op = call.operation
    if call.service == "dynamodb":
        table = f"arn:aws:dynamodb:{here}:table"
        if op in ("TransactWriteItems", "TransactGetItems"):
            return {
                Request.of(f"dynamodb:{TRANSACT[kind]}", f"{table}/{body['TableName']}")
                for item in p["TransactItems"]
                for kind, body in item.items()
            }
        if op in ("BatchWriteItem", "BatchGetItem"):
            return {Request.of(f"dynamodb:{op}", f"{table}/{name}") for name in p["RequestItems"]}
        index = f"/index/{p['IndexName']}" if p.get("IndexName") else ""
        return {Request.of(f"dynamodb:{op}", f"{table}/{p['TableName']}{index}")}
    if call.service == "s3":
        bucket = f"arn:aws:s3:::{p['Bucket']}"
        if op == "DeleteObjects":
            return {
                Request.of("s3:DeleteObject", f"{bucket}/{o['Key']}")
                for o in p["Delete"]["Objects"]
            }
        if op == "ListObjectsV2":
            return {Request.of("s3:ListBucket", bucket, **{"s3:prefix": p.get("Prefix", "")})}
        return {Request.of(f"s3:{S3_ACTIONS.get(op, op)}", f"{bucket}/{p['Key']}")}
    if (call.service, op) in ON_PARAMETER:
        action, parameter = ON_PARAMETER[call.service, op]
        return {Request.of(action, p[parameter])}
    if call.service in ("lambda", "bedrock-runtime"):
        return _turn_requests(call)
    if call.service == "events" and op == "PutEvents":
        return {
            Request.of(
                "events:PutEvents",
                f"arn:aws:events:{here}:event-bus/{entry['EventBusName']}",
                **{"events:source": entry["Source"], "events:detail-type": entry["DetailType"]},
            )
            for entry in p["Entries"]
        }
    assert ctx is not None, f"{call.service}.{op} outside the driver scenario"
    return _driver_requests(call, ctx)


HERE = f"{REGION}:{ACCOUNT}"
MODEL_ACTION = "bedrock:InvokeModelWithResponseStream"  # ConverseStream


def _turn_requests(call: Call) -> set[Request]:
    """An agent turn's: the API's asynchronous start, the model call."""
    p = call.params
    if call.service == "lambda" and call.operation == "Invoke":
        qualifier = f":{p['Qualifier']}" if p.get("Qualifier") else ""
        return {Request.of("lambda:InvokeFunction", f"{p['FunctionName']}{qualifier}")}
    if call.service == "bedrock-runtime" and call.operation == "ConverseStream":
        return _model_requests(p["modelId"])
    raise AssertionError(f"unmapped call {call.service}.{call.operation}")


def _model_requests(model_id: str) -> set[Request]:
    """A model id or an ARN: the model itself; a system inference profile: the profile, and its
    foundation model in the region the profile routes to, through the profile."""
    if model_id.startswith("arn:"):
        return {Request.of(MODEL_ACTION, model_id)}
    behind = StageConfig.inference_profile_model(model_id)
    if behind is None:
        return {Request.of(MODEL_ACTION, f"arn:aws:bedrock:{REGION}::foundation-model/{model_id}")}
    profile = f"arn:aws:bedrock:{HERE}:inference-profile/{model_id}"
    model = f"arn:aws:bedrock:{PROFILE_DESTINATION}::foundation-model/{behind}"
    return {
        Request.of(MODEL_ACTION, profile),
        Request.of(MODEL_ACTION, model, **{"bedrock:InferenceProfileArn": profile}),
    }


def _pass_roles(roles: list[str], service: str) -> set[Request]:
    return {Request.of("iam:PassRole", role, **{"iam:PassedToService": service}) for role in roles}


def _task_definition(name: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:ecs:{HERE}:task-definition/{name}"


def _driver_requests(call: Call, ctx: Context) -> set[Request]:
    mappers = {"ecs": _ecs_requests, "efs": _efs_requests, "ec2": _ec2_requests}
    if call.service not in mappers:
        raise AssertionError(f"unmapped driver call {call.service}.{call.operation}")
    return mappers[call.service](call.operation, call.params, ctx)


def _ecs_requests(op: str, p: dict[str, Any], ctx: Context) -> set[Request]:
    cluster = {"ecs:cluster": ctx.cluster_arn}
    if op == "RunTask":
        new_task = f"{ctx.cluster_arn.replace(':cluster/', ':task/')}/new-task-id"
        requests = {Request.of("ecs:RunTask", _task_definition(p["taskDefinition"]), **cluster)}
        requests |= _pass_roles(ctx.task_definition_roles, "ecs-tasks.amazonaws.com")
        if p.get("tags"):
            requests.add(Request.of("ecs:TagResource", new_task, **{"ecs:CreateAction": "RunTask"}))
        for volume in p.get("volumeConfigurations", []):
            requests |= _pass_roles([volume["managedEBSVolume"]["roleArn"]], "ecs.amazonaws.com")
        return requests
    if op in ("DescribeTasks", "StopTask"):
        tasks = p["tasks"] if op == "DescribeTasks" else [p["task"]]
        return {Request.of(f"ecs:{op}", task, **cluster) for task in tasks}
    if op == "DescribeTaskDefinition":
        return {Request.of("ecs:DescribeTaskDefinition", "*")}
    if op == "RegisterTaskDefinition":
        roles = [p[k] for k in ("taskRoleArn", "executionRoleArn") if p.get(k)]
        requests = {Request.of("ecs:RegisterTaskDefinition", "*")}
        requests |= _pass_roles(roles, "ecs-tasks.amazonaws.com")
        if p.get("tags"):
            created = _task_definition(f"{p['family']}:1")
            on_register = {"ecs:CreateAction": "RegisterTaskDefinition"}
            requests.add(Request.of("ecs:TagResource", created, **on_register))
        return requests
    raise AssertionError(f"unmapped driver call ecs.{op}")


def _efs_requests(op: str, p: dict[str, Any], ctx: Context) -> set[Request]:
    file_system = f"arn:aws:elasticfilesystem:{HERE}:file-system/{p['FileSystemId']}"
    requests = {Request.of(f"elasticfilesystem:{op}", file_system)}
    if op == "CreateAccessPoint" and p.get("Tags"):
        point = f"arn:aws:elasticfilesystem:{HERE}:access-point/fsap-new"
        on_create = {"elasticfilesystem:CreateAction": "CreateAccessPoint"}
        requests.add(Request.of("elasticfilesystem:TagResource", point, **on_create))
    return requests


def _ec2_requests(op: str, p: dict[str, Any], ctx: Context) -> set[Request]:
    if op in ("DescribeVolumes", "DescribeSnapshots"):
        return {Request.of(f"ec2:{op}", "*")}
    if op == "CreateSnapshot":
        volume = f"arn:aws:ec2:{HERE}:volume/{p['VolumeId']}"
        requested = {
            t["Key"]: t["Value"] for spec in p.get("TagSpecifications", []) for t in spec["Tags"]
        }
        request_tags = _tags(requested, "aws:RequestTag")
        snapshot = f"arn:aws:ec2:{REGION}::snapshot/snap-new"
        resource_tags = _tags(ctx.volume_tags.get(p["VolumeId"], {}), "aws:ResourceTag")
        on_create = {"ec2:CreateAction": "CreateSnapshot"}
        return {
            Request.of("ec2:CreateSnapshot", volume, **resource_tags, **request_tags),
            Request.of("ec2:CreateSnapshot", snapshot, **request_tags),
            Request.of("ec2:CreateTags", snapshot, **request_tags, **on_create),
        }
    if op == "DeleteSnapshot":
        snapshot = f"arn:aws:ec2:{REGION}::snapshot/{p['SnapshotId']}"
        tags = _tags(ctx.snapshot_tags.get(p["SnapshotId"], {}), "aws:ResourceTag")
        return {Request.of("ec2:DeleteSnapshot", snapshot, **tags)}
    raise AssertionError(f"unmapped driver call ec2.{op}")


def translate(call: Call, names: dict[str, str]) -> Call:
    """Moto's names (table, bucket, state machines, secret) -> the stack's resolved ones."""
    text = json.dumps(call.params, default=repr)
    for old in sorted(names, key=len, reverse=True):
        text = text.replace(old, names[old])
    return Call(call.function, call.service, call.operation, json.loads(text))


# ------------------------------------------------------------------ 1. the flow


class DriverLog:
    """Wraps the sandbox driver: which methods each function called."""

    def __init__(self) -> None:
        self.calls: set[tuple[str, str]] = set()

    def wrap(self, driver: Any) -> Any:
        log = self

        class Recording:
            def __getattr__(self, name: str) -> Any:
                value = getattr(driver, name)
                if name in DRIVER_METHODS and callable(value):

                    def method(*args: Any, **kwargs: Any) -> Any:
                        log.calls.add((iam.current_function() or "", name))
                        return value(*args, **kwargs)

                    return method
                return value

        return Recording()

    def methods(self, function: str) -> set[str]:
        return {method for who, method in self.calls if who == function}


@dataclass
class Flow:
    calls: list[Call]
    driver: DriverLog
    moto_names: dict[str, str]  # moto value -> role it plays (table, bucket, machine:<name>, ...)


def _ok(reply: Any, status: int = 200) -> Any:
    assert reply.status == status, (reply.status, reply.body)
    return reply.body


def listed_ids(api: LambdaApi, chats: str, chat: str) -> list[str]:
    return [m["id"] for m in _ok(api.get(f"{chats}/{chat}/messages"))["messages"]]


def attach(api: LambdaApi, sid: str, data: bytes) -> dict[str, Any]:
    """A text file uploaded for a message of the session (POST …/attachments)."""
    reply = api.request(
        "POST", f"/api/sessions/{sid}/attachments", raw_body=data,
        headers={"content-type": "text/plain"},
    )  # fmt: skip
    uploaded: dict[str, Any] = _ok(reply, 201)
    return uploaded


def drive_every_route(api: LambdaApi) -> None:
    """Sessions, chats and messages (provisioning off: the sandbox flow has its own session)."""
    _ok(api.get("/api/health"))
    _ok(api.put("/api/user/preferences", {"autoCommitPush": True, "defaultModelId": MODEL}))
    _ok(api.get("/api/user/preferences"))
    created = _ok(api.post("/api/sessions", {"title": "Least privilege"}), 201)
    sid, first_chat = created["session"]["id"], created["chat"]["id"]
    for status in ("all", "active", "archived"):
        _ok(api.get("/api/sessions", query={"status": status}))
    _ok(api.get(f"/api/sessions/{sid}"))
    _ok(api.patch(f"/api/sessions/{sid}", {"title": "Renamed"}))
    _ok(api.get(f"/api/sessions/{sid}/events"))

    chats = f"/api/sessions/{sid}/chats"
    chat = _ok(api.post(chats, {"id": "chat-two"}))["chat"]["id"]
    _ok(api.get(chats))
    _ok(api.get(f"{chats}/{chat}"))
    _ok(api.patch(f"{chats}/{chat}", {"title": "Second"}))
    text = {"id": "m-user", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    _ok(api.post(f"{chats}/{chat}/messages", {"message": text}))
    big = "x" * 400_000  # over the inline limit: the body goes to S3
    answer = {"id": "m-big", "role": "assistant", "parts": [{"type": "text", "text": big}]}
    _ok(api.post(f"{chats}/{chat}/messages", {"message": answer}))
    answer["parts"] = [{"type": "text", "text": big + "!"}]  # upsert: new object, old dropped
    assert _ok(api.post(f"{chats}/{chat}/messages", {"message": answer}))["status"] == "updated"
    listed = _ok(api.get(f"{chats}/{chat}/messages"))["messages"]
    assert listed[-1]["parts"][0]["text"].endswith("!")
    _ok(api.post(f"{chats}/{chat}/read"))
    fork = _ok(api.post(f"{chats}/{chat}/fork", {"messageId": "m-big"}))["chat"]["id"]
    share = _ok(api.post(f"{chats}/{fork}/share"))["shareId"]
    _ok(api.get(f"{chats}/{fork}/share"))
    for suffix in ("", "/markdown", "/status"):  # public: no token
        _ok(api.get(f"/api/shared/{share}{suffix}", user=None))
    _ok(api.delete(f"{chats}/{fork}/share"))
    _ok(api.get(f"{chats}/{chat}/messages", query={"before": "end"}))
    _ok(api.delete(f"{chats}/{fork}/messages/{listed_ids(api, chats, fork)[0]}"))
    _ok(api.post(f"{chats}/{first_chat}/messages", {"message": {**answer, "id": "m-big-2"}}))
    _ok(api.delete(f"{chats}/{chat}"))

    _ok(api.patch(f"/api/sessions/{sid}", {"status": "archived"}))
    _ok(api.patch(f"/api/sessions/{sid}", {"status": "running"}))
    # a file for a message: uploaded, read back, and deleted with its session
    notes = attach(api, sid, b"notes\n")
    assert api.get(notes["url"]).status == 200
    _ok(api.delete(f"/api/sessions/{sid}"))


class CloudFrontApi(LambdaApi):
    """The API as CloudFront calls it: every request carries the origin-verify header."""

    def request(self, method: str, path: str, **kw: Any) -> Reply:
        kw["headers"] = {ORIGIN_HEADER: ORIGIN_VALUE, **(kw.get("headers") or {})}
        return super().request(method, path, **kw)


def drive_github(api: LambdaApi, direct: LambdaApi) -> None:
    """The origin check, archiving a GitHub session (its PR is refreshed with the token; GitHub
    is unreachable here, which the refresh tolerates) and a signed webhook delivery."""
    assert direct.get("/api/sessions").status == 403  # execute-api without CloudFront's header
    repo = {"title": "PR", "repoUrl": "https://github.com/octo/widgets", "branch": "fix"}
    sid = _ok(api.post("/api/sessions", repo), 201)["session"]["id"]
    _ok(api.patch(f"/api/sessions/{sid}", {"status": "archived"}))
    event = {
        "action": "closed",
        "number": 7,
        "pull_request": {"number": 7, "merged": True},
        "repository": {"name": "widgets", "owner": {"login": "octo"}},
    }
    body = json.dumps(event).encode()
    signature = "sha256=" + hmac.new(WEBHOOK_KEY.encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-github-event": "pull_request", "x-hub-signature-256": signature}
    reply = api.post("/api/github/webhook", raw_body=body, user=None, headers=headers)
    assert _ok(reply)["prStatus"] == "merged"


def _state(api: LambdaApi, sid: str) -> dict[str, Any]:
    session: dict[str, Any] = _ok(api.get(f"/api/sessions/{sid}"))["session"]
    return session


def wait_state(api: LambdaApi, sid: str, *states: str, limit: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        session = _state(api, sid)
        if session["lifecycleState"] in states:
            return session
        time.sleep(0.2)
    raise AssertionError(f"{sid} stayed {session['lifecycleState']}: {session['lifecycleError']}")


def drive_a_sandbox(api: LambdaApi, world: World) -> None:
    """Provision, use, hibernate twice (the second snapshot replaces the first), resume, lose
    the loop and let the reconciler start a new one, lose the sandbox behind the control
    plane's back."""
    sid = _ok(api.post("/api/sessions", {"title": "Sandbox"}), 201)["session"]["id"]
    wait_state(api, sid, "active")
    _ok(api.get("/api/sandbox/status", query={"sessionId": sid}))
    tools = f"/api/sessions/{sid}/sandbox"
    # a repository in the workspace (AWS mode clones only https:// URLs; there is no network)
    init = (
        "git init -q -b main && git -c user.name=t -c user.email=t@t commit -qm i --allow-empty"
        f" && git checkout -q -b {OWN_BRANCH}"
    )
    assert _ok(api.post(f"{tools}/exec", {"command": init}))["exitCode"] == 0
    _ok(api.get(f"{tools}/files"))
    _ok(api.get(f"{tools}/diff"))  # computed, and cached under diffs/
    _ok(api.get(f"{tools}/diff/cached"))
    _ok(api.post("/api/sandbox/activity", {"sessionId": sid}))
    _ok(api.post("/api/sandbox/extend", {"sessionId": sid}))
    wait_state(api, sid, "hibernated")  # idle: the lifecycle loop snapshots and stops
    _ok(api.put("/api/sandbox/snapshot", {"sessionId": sid}))
    wait_state(api, sid, "active")
    _ok(api.post("/api/sandbox/snapshot", {"sessionId": sid}), 202)  # hibernate now
    wait_state(api, sid, "hibernated")
    _ok(api.put("/api/sandbox/snapshot", {"sessionId": sid}))
    wait_state(api, sid, "active")
    world.lose_run(api, sid)  # the loop is gone and the session overdue: the reconciler's case
    world.leave_a_tombstone(api)  # and a delete left half done
    swept = world.sweep()
    assert (swept["kicked"], swept["purged"]) == (1, 1)
    wait_state(api, sid, "hibernated")
    _ok(api.put("/api/sandbox/snapshot", {"sessionId": sid}))
    wait_state(api, sid, "active")
    _ok(api.post("/api/sandbox/activity", {"sessionId": sid}))  # the loop sleeps meanwhile
    world.lose_sandbox(sid)
    lost = api.post(f"{tools}/exec", {"command": "true"})
    assert lost.status in (409, 503), lost.body


def delete_a_live_sandbox(api: LambdaApi) -> None:
    """Delete a resumed session: the API stops its sandbox and drops its snapshot first."""
    sid = _ok(api.post("/api/sessions", {"title": "Deleted live"}), 201)["session"]["id"]
    wait_state(api, sid, "active")
    _ok(api.post("/api/sandbox/snapshot", {"sessionId": sid}), 202)
    wait_state(api, sid, "hibernated")
    _ok(api.put("/api/sandbox/snapshot", {"sessionId": sid}))
    wait_state(api, sid, "active")
    _ok(api.delete(f"/api/sessions/{sid}"))


def archive_a_sandbox(api: LambdaApi, world: World) -> None:
    """Archive while hibernated (the archiver bundles from a temporary sandbox restored from the
    snapshot, then drops it), unarchive (provisioned from the bundle), archive while active (the
    newer bundle replaces the older one)."""
    sid = _ok(api.post("/api/sessions", {"title": "Archive"}), 201)["session"]["id"]
    wait_state(api, sid, "active")
    init = (
        "git init -q -b main && git -c user.name=t -c user.email=t@t commit -qm i --allow-empty"
        f" && git checkout -q -b {OWN_BRANCH}"
    )
    tools = f"/api/sessions/{sid}/sandbox"
    assert _ok(api.post(f"{tools}/exec", {"command": init}))["exitCode"] == 0
    _ok(api.post("/api/sandbox/snapshot", {"sessionId": sid}), 202)
    wait_state(api, sid, "hibernated")
    _ok(api.patch(f"/api/sessions/{sid}", {"status": "archived"}))
    assert world.finalize(sid)["finalized"]
    _ok(api.patch(f"/api/sessions/{sid}", {"status": "running"}))
    wait_state(api, sid, "active")
    _ok(api.post("/api/sandbox/activity", {"sessionId": sid}))
    _ok(api.patch(f"/api/sessions/{sid}", {"status": "archived"}))
    assert world.finalize(sid)["finalized"]
    assert _state(api, sid)["lifecycleState"] == "archived"


def auto_archive_a_stale_session(api: LambdaApi, world: World) -> None:
    """The auto-archive schedule: a GitHub session hibernated a month ago is archived (its PR
    refreshed with the token, tolerating an unreachable GitHub), found through the idle index."""
    repo = {"title": "Stale", "repoUrl": "https://github.com/octo/stale", "branch": "old"}
    sid = _ok(api.post("/api/sessions", repo), 201)["session"]["id"]
    world.age_hibernation(sid, days=30)
    assert world.auto_archive()["archived"] == 1
    assert _state(api, sid)["lifecycleState"] == "archived"


def fail_a_provisioning(api: LambdaApi) -> None:
    """The provisioner's failure path, its steps invoked in process as Step Functions would:
    a private GitHub repository's clone (a short-lived token from the GitHub token secret; the
    clone itself fails here, GitHub being unreachable) — then the started sandbox is stopped
    and the session marked failed."""
    provisioner = local_stepfunctions.resolve(catalog.FUNCTIONS["provisioner"])
    step = iam.attributed("provisioner", provisioner)
    repo = {"title": "Fails", "repoUrl": "https://github.com/octo/private"}
    sid = _ok(api.post("/api/sessions", repo), 201)["session"]["id"]
    base = {"sessionId": sid, "generation": 1}
    assert step({**base, "step": "start"}, LambdaContext())["started"]
    for attempts in range(30):
        if step({**base, "step": "probe", "attempts": attempts}, LambdaContext())["ready"]:
            break
        time.sleep(0.2)
    with pytest.raises(Exception, match="clone"):
        step({**base, "step": "prepare"}, LambdaContext())
    error = {"Error": "States.Timeout", "Cause": "forced by the test"}
    assert step({**base, "step": "fail", "error": error}, LambdaContext())["state"] == "failed"


@pytest.fixture(scope="module")
def flow(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _run_flow(moto_endpoint, tmp_path_factory.mktemp("flow"), monkeypatch)


def _run_flow(moto_endpoint: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> Flow:
    table = f"t-{uuid.uuid4().hex[:12]}"
    bucket = f"artifacts-{table}"
    for service in ("S3", "SECRETS_MANAGER", "EVENTBRIDGE"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", moto_endpoint)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=bucket)
    bus = boto3.client("events", region_name=REGION).create_event_bus(Name=f"bus-{table}")
    assert bus["EventBusArn"]
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secret = secrets.create_secret(Name=f"token-key-{table}", SecretString="k" * 64)["ARN"]
    webhook, github_token, origin = (
        secrets.create_secret(Name=f"{name}-{table}", SecretString=value)["ARN"]
        for name, value in (
            ("webhook", WEBHOOK_KEY),
            ("github-token", "github_pat_least_privilege"),
            ("origin", ORIGIN_VALUE),
        )
    )
    base = Settings(
        home=home / "home",
        table_name=table,
        dynamodb_endpoint=moto_endpoint,
        rate_limit_per_minute=1000,
        rate_limit_window_seconds=3600,
        provision_on_create=False,
    )
    items.bind(table, moto_endpoint, base.region)
    items.create_table()
    quick = base.model_copy(
        update={
            "mode": Mode.AWS,
            "artifact_bucket": bucket,
            "sandbox_token_secret_arn": secret,
            "event_bus_name": f"bus-{table}",
            # long enough for a loaded machine's tool calls between two activities (at 2 s the
            # loop hibernated a session between the test's diff and extend calls)
            "idle_timeout_seconds": 6,
            "lifecycle_min_sleep_seconds": 0.5,
            "snapshot_retry_seconds": 1,
            "turn_heartbeat_seconds": 60,
            "github_webhook_secret_arn": webhook,
            "github_token_secret_arn": github_token,
            "github_api_url": "http://127.0.0.1:9",  # nothing listens: PR refreshes fail fast
            "origin_secret_arn": origin,
            # below moto's own cap (it counts an updated item's old and new body together):
            # the agent's assistant message outgrows it after a few tool outputs
            "inline_message_bytes": INLINE_BYTES,
            "models": (f"bedrock/{PROFILE}",),
            "agent_function_arn": AGENT_ARN,
        }
    )
    log = DriverLog()
    monkeypatch.setattr(composition, "_driver", lambda *a: log.wrap(BUILD_DRIVER(*a)))
    real_resolve = local_stepfunctions.resolve
    monkeypatch.setattr(
        local_stepfunctions,
        "resolve",
        lambda handler: iam.attributed(BY_HANDLER[handler], real_resolve(handler)),
    )
    with (
        iam.recording() as calls,
        provisioning_runtime(quick, moto_endpoint, monkeypatch) as live,
        AgentFunction(live, monkeypatch) as agent,
    ):
        crud = CloudFrontApi(live.model_copy(update={"provision_on_create": False}))
        direct = LambdaApi(live.model_copy(update={"provision_on_create": False}))
        sandbox_api = CloudFrontApi(live)
        for client in (crud, direct, sandbox_api):
            client._handler = iam.attributed(API, client._handler)  # type: ignore[assignment]
        drive_every_route(crud)
        drive_github(crud, direct)
        machines = dict(live.state_machines)
        world = World(live)
        drive_a_sandbox(sandbox_api, world)
        delete_a_live_sandbox(sandbox_api)
        archive_a_sandbox(sandbox_api, world)
        auto_archive_a_stale_session(crud, world)
        fail_a_provisioning(crud)
        run_agent_turns(sandbox_api, world, agent)
    names = {table: "table", bucket: "bucket", secret: "secret", f"bus-{table}": "bus"}
    names[AGENT_ARN] = "agent-function"
    names |= {webhook: "webhook-secret", github_token: "github-token", origin: "origin-secret"}
    names |= {arn: f"machine:{name}" for name, arn in machines.items()}
    return Flow([c for c in calls if c.function], log, names)


class _Attributed:
    """The agent loop whose steps' AWS calls are recorded as the agent function's, on whatever
    thread the durable SDK runs a step."""

    def __init__(self, loop: AgentLoop) -> None:
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._loop, name)
        return iam.attributed(AGENT, value) if callable(value) else value


class AgentFunction:
    """The durable agent-turn function, in process. The API's asynchronous invoke goes to a real
    ``lambda`` client answered by a Stubber (moto runs no durable functions) and queues the
    execution; queued executions run (at once, or when ``release``d after ``hold``) on the
    durable SDK's local runner: the real handler (``functions.agent.handler.make_handler``
    around the function's own container, built from its settings), attributed to ``agent``.
    The model is Bedrock: its ``bedrock-runtime`` client answered at the wire."""

    def __init__(self, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
        self._settings = settings
        self.client = boto3.client("lambda", region_name=REGION)  # created while recording
        self.stubber = Stubber(self.client)
        self.bedrock = Bedrock()
        monkeypatch.setattr(model_registry, "_bedrock_client", lambda _: self.bedrock.client)
        build_client = composition._client
        monkeypatch.setattr(
            composition,
            "_client",
            lambda service, *a: self if service == "lambda" else build_client(service, *a),
        )

        def loop() -> AgentLoop:
            attributed: Any = _Attributed(agent_handler.runtime.get(settings).agent_loop)
            return cast(AgentLoop, attributed)

        self._runner = DurableFunctionTestRunner(
            handler=agent_handler.make_handler(loop), skip_time=False
        )
        self._held = False
        self._queued: list[dict[str, Any]] = []
        self._executions: dict[str, str] = {}

    def __enter__(self) -> AgentFunction:
        self.stubber.activate()
        self.bedrock.stubber.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self._runner.close()  # type: ignore[no-untyped-call]
        self.stubber.deactivate()
        self.bedrock.stubber.deactivate()
        agent_handler.runtime.get(self._settings).driver.close()
        if exc[0] is None:
            self.bedrock.stubber.assert_no_pending_responses()

    def invoke(self, **params: Any) -> Any:
        """``lambda.invoke`` as the API's turn engine calls it."""
        expected = {
            "FunctionName": AGENT_ARN,
            "InvocationType": "Event",
            "DurableExecutionName": ANY,
            "Payload": ANY,
        }
        self.stubber.add_response("invoke", {"StatusCode": 202}, expected)
        answer = self.client.invoke(**params)
        self._queued.append(params)
        if not self._held:
            self.release()
        return answer

    def hold(self) -> None:
        self._held = True

    def release(self) -> None:
        self._held = False
        for params in self._queued:
            name = params["DurableExecutionName"]
            self._executions[name] = self._runner.run_async(
                input=params["Payload"].decode(),
                execution_name=name,
                function_name=AGENT,
                execution_timeout=self._settings.agent_turn_timeout_seconds,
            )
        self._queued.clear()

    def wait(self, run_id: str) -> None:
        self._runner.wait_for_result(self._executions[run_id], timeout=120)


def _tool_use(index: int, call_id: str, name: str, tool_input: dict[str, Any]) -> list[Any]:
    start = {"toolUse": {"toolUseId": call_id, "name": name}}
    delta = {"toolUse": {"input": json.dumps(tool_input)}}
    return [
        {"contentBlockStart": {"start": start, "contentBlockIndex": index}},
        {"contentBlockDelta": {"delta": delta, "contentBlockIndex": index}},
        {"contentBlockStop": {"contentBlockIndex": index}},
    ]


def _model_answer(blocks: list[Any], stop: str) -> list[dict[str, Any]]:
    usage = {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70}
    return [
        {"messageStart": {"role": "assistant"}},
        *blocks,
        {"messageStop": {"stopReason": stop}},
        {"metadata": {"usage": usage, "metrics": {"latencyMs": 10}}},
    ]


def _text(text: str) -> list[Any]:
    return [
        {"contentBlockDelta": {"delta": {"text": text}, "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
    ]


# bash outputs are capped at 50,000 characters: three make the assistant message larger than
# the flow's inline limit (its body goes to S3, the next step reads it back, and each later
# upsert replaces the object)
INLINE_BYTES = 100_000
OWN_BRANCH = "agent/multiply"
BIG_OUTPUTS = 3
BIG_OUTPUT = "head -c 60000 /dev/zero | tr '\\0' x"
# stdout and stderr both at the tool's cap: its step's segment is larger than a body kept inline,
# so that step writes the message whole (to S3) and the turn's end replaces that body (a delete)
BIGGER_OUTPUT = f"{BIG_OUTPUT}; {BIG_OUTPUT} >&2"


def run_agent_turns(api: LambdaApi, world: World, agent: AgentFunction) -> None:
    """Two agent turns on a GitHub session (the repository fields are the test's own write:
    there is no network to clone from), started through ``POST /api/chat``:

    1. its invocation is queued while the session hibernates, so the turn resumes it; a model
       step (Bedrock) writes a file and runs bash with large outputs (the assistant message's
       body goes to S3), the next one ends with text; the natural finish auto-commits (the
       default branch asked of GitHub with the token, unreachable here), refreshes the diff and
       kicks the lifecycle loop;
    2. the sandbox is lost behind the control plane's back during the model call: the diff
       refresh finds sandboxd unreachable and probes the sandbox."""
    sid, chat = (lambda created: (created["session"]["id"], created["chat"]["id"]))(
        _ok(api.post("/api/sessions", {"title": "Agent"}), 201)
    )
    wait_state(api, sid, "active")
    init = (
        "git init -q -b main && git -c user.name=t -c user.email=t@t commit -qm i --allow-empty"
        f" && git checkout -q -b {OWN_BRANCH}"
    )
    tools = f"/api/sessions/{sid}/sandbox"
    assert _ok(api.post(f"{tools}/exec", {"command": init}))["exitCode"] == 0
    world.make_github(sid)
    bash = [
        event
        for i in range(BIG_OUTPUTS)
        for event in _tool_use(
            1 + i, f"tu-bash-{i}", "bash", {"command": BIGGER_OUTPUT if i == 0 else BIG_OUTPUT}
        )
    ]
    written = {"filePath": "multiply.py", "content": "def multiply(a, b):\n    return a * b\n"}
    agent.bedrock.answer(
        _model_answer([*_tool_use(0, "tu-write", "write", written), *bash], "tool_use")
    )
    # the title step right after the first model step names the chat (through Bedrock too)
    agent.bedrock.answer(_model_answer(_text("Add a multiply function"), "end_turn"))
    agent.bedrock.answer(_model_answer(_text("Added multiply."), "end_turn"))
    agent.bedrock.answer(
        _model_answer(_text("Nothing to do."), "end_turn"), then=lambda: world.lose_sandbox(sid)
    )
    model = f"bedrock/{PROFILE}"

    notes = attach(api, sid, b"multiply two numbers\n")  # read by the agent's model step
    file_part = {"type": "file", "mediaType": "text/plain", "url": notes["url"]}

    def turn(message_id: str, text: str) -> str:
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}, file_part]
        message = {"id": message_id, "role": "user", "parts": parts}
        body = {"sessionId": sid, "chatId": chat, "message": message, "modelId": model}
        run_id: str = _ok(api.post("/api/chat", body), 202)["runId"]
        return run_id

    agent.hold()
    first = turn("m-turn-1", "add a multiply function")
    _ok(api.post("/api/sandbox/snapshot", {"sessionId": sid}), 202)
    wait_state(api, sid, "hibernated")
    agent.release()
    agent.wait(first)
    (run,) = _ok(api.get(f"/api/sessions/{sid}/runs"))["runs"]
    assert (run["status"], run["modelId"], run["error"]) == ("completed", model, None), run
    events = _ok(api.get(f"/api/sessions/{sid}/events"))["events"]
    (commit,) = [e["detail"] for e in events if e["type"] == "sandbox.auto_commit"]
    assert commit["committed"] is True, commit  # the agent's file, committed after the turn
    second = turn("m-turn-2", "anything else?")
    agent.wait(second)
    latest = _ok(api.get(f"/api/sessions/{sid}/runs"))["runs"][0]
    assert (latest["runId"], latest["status"]) == (second, "completed"), latest


class _NoMetrics:
    def count(self, name: str, value: int = 1) -> None:
        pass


class World:
    """What happens to a session outside the control plane (the test's own calls, recorded
    for no function), and the reconciler's schedule."""

    def __init__(self, live: Settings) -> None:
        self._live = live
        self._container = composition.build(live, _NoMetrics())
        handler = local_stepfunctions.resolve(catalog.FUNCTIONS["lifecycle"])
        self._lifecycle = iam.attributed("lifecycle", handler)
        archiver = local_stepfunctions.resolve(catalog.FUNCTIONS["archiver"])
        self._archiver = iam.attributed("archiver", archiver)

    def finalize(self, sid: str) -> dict[str, Any]:
        """What the archive-finalizer rule delivers for a ``Session Archived`` event."""
        pattern = catalog.RULES["archive-finalizer"]["pattern"]
        event = {
            "id": uuid.uuid4().hex,
            "source": pattern["source"][0],
            "detail-type": pattern["detail-type"][0],
            "detail": {"sessionId": sid, "finalize": True},
        }
        result: dict[str, Any] = self._archiver(event, LambdaContext())
        return result

    def auto_archive(self) -> dict[str, Any]:
        """What the auto-archive schedule delivers."""
        schedule = catalog.SCHEDULES["auto-archive"]
        result: dict[str, Any] = self._archiver({"step": schedule["step"]}, LambdaContext())
        return result

    def age_hibernation(self, sid: str, days: int) -> None:
        """The session has been hibernated for ``days`` (the test's own write)."""
        store = self._container.sessions._store
        session = self._container.sessions.get(ALICE, sid)
        since = datetime.now(UTC) - timedelta(days=days)
        changes: LifecycleFields = {
            "lifecycle_state": LifecycleState.HIBERNATED,
            "hibernated_at": since,
        }
        state = session.lifecycle_state or LifecycleState.PROVISIONING
        store.transition(
            sid,
            expect=frozenset({state}),
            changes=with_due(session, changes),
            entry=None,
        )

    def sweep(self) -> dict[str, Any]:
        result: dict[str, Any] = self._lifecycle({"step": "reconcile"}, LambdaContext())
        return result

    def leave_a_tombstone(self, api: LambdaApi) -> None:
        """A delete whose children stayed behind (its inline purge failed): the reconciler's
        sweep finishes it."""
        sid = _ok(api.post("/api/sessions", {"title": "Deleted"}), 201)["session"]["id"]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(DynamoStore, "_purge_now", lambda self, tombstone: None)
            _ok(api.delete(f"/api/sessions/{sid}"))

    def make_github(self, sid: str) -> None:
        """The session's repository is on GitHub (the test's own write, on the item)."""
        item = items.SessionItem.get(*session_key(sid))
        item.update(
            actions=[
                items.SessionItem.repo_owner.set("octo"),
                items.SessionItem.repo_name.set("widgets"),
                items.SessionItem.clone_url.set("https://github.com/octo/widgets"),
                # the branch it was created on: the only one auto-commit may push
                items.SessionItem.own_branch.set(OWN_BRANCH),
                items.SessionItem.branch.set(OWN_BRANCH),
            ]
        )

    def lose_sandbox(self, sid: str) -> None:
        """Kill the sandbox and wait until it is really gone (nothing answers any more)."""
        session = self._container.sessions.get(ALICE, sid)
        handle = session.sandbox
        assert handle
        self._container.driver.stop(handle)
        deadline = time.monotonic() + 10
        while self._container.driver.probe(handle).state not in (
            SandboxState.STOPPED,
            SandboxState.GONE,
        ):
            assert time.monotonic() < deadline, "the sandbox did not stop"
            time.sleep(0.05)

    def lose_run(self, api: LambdaApi, sid: str) -> None:
        """A lease nobody holds, on a session due long ago (its run was lost). The loop's idle
        timer is short: when it hibernates the session before the lease is taken (a slow
        machine), the session is resumed and the lease taken again."""
        store = self._container.lifecycle._store
        active = frozenset({LifecycleState.ACTIVE})
        for _ in range(5):
            try:
                store.transition(
                    sid, expect=active, changes={"lifecycle_run_id": "lost"}, entry=None
                )
                break
            except StaleState:
                wait_state(api, sid, "hibernated")
                _ok(api.put("/api/sandbox/snapshot", {"sessionId": sid}))
                wait_state(api, sid, "active")
        else:
            pytest.fail("the lifecycle loop hibernated the session before every lease")
        session = self._container.sessions.get(ALICE, sid)
        sfn = boto3.client(
            "stepfunctions", endpoint_url=self._live.stepfunctions_endpoint, region_name=REGION
        )
        machine = self._live.state_machines["lifecycle"]
        for run in sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")[
            "executions"
        ]:
            sfn.stop_execution(executionArn=run["executionArn"])
        due = session.created_at - timedelta(minutes=5)
        overdue = session.model_copy(update={"hibernate_after": due})
        store.transition(
            sid, expect=active, changes=with_due(overdue, {"hibernate_after": due}), entry=None
        )


# ------------------------------------------------------------------ 2. the Fargate driver


@dataclass
class FakeSandboxd(SandboxdFake):
    """sandboxd as the driver sees it: no AWS calls of its own."""

    payload: bytes = b"zstd archive " * 100

    def health(self) -> Health:
        return Health.from_answer({"ok": True})

    def sync(self) -> Synced:
        return Synced(ok=True)

    def snapshot_to(self, out: BinaryIO) -> SnapshotManifest:
        out.write(self.payload)
        digest = hashlib.sha256(self.payload).hexdigest()
        answer = {"sha256": digest, "archiveBytes": len(self.payload), "fileCount": 1}
        return SnapshotManifest.from_answer(answer)

    def restore_from(self, src: BinaryIO, expected_sha256: str) -> Restored:
        src.read()
        return Restored.from_answer({"sha256": expected_sha256})


def _fake_sandboxd(endpoint: str, token: str) -> FakeSandboxd:
    return FakeSandboxd()


class FargateScenario:
    """Every ``FargateDriver`` method once, the driver built by ``openagents.composition`` from
    the settings the synthesized template gives the functions. ECS answers from a Stubber,
    EC2/EFS/S3 are the moto server; each call is recorded with the method it ran for."""

    def __init__(self, synth: Synth, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.synth, self.endpoint, self.monkeypatch = synth, moto_endpoint, monkeypatch
        resolve = Resolver(synth.data)
        self.settings = settings_from(functions(synth)[API].environment, monkeypatch)
        assert self.settings.sandbox_driver == "fargate"
        self.efs_mode = self.settings.fargate_storage == "efs"
        (definition,) = synth.resources("AWS::ECS::TaskDefinition").values()
        # EBS: no task role (the task has no credentials); EFS: the mount-only one
        self.roles = [
            resolve(definition["Properties"][k])
            for k in ("TaskRoleArn", "ExecutionRoleArn")
            if k in definition["Properties"]
        ]
        cluster = resolve({"Fn::GetAtt": [synth.logical_id(synth.stack.sandbox.cluster), "Arn"]})
        self.ctx = Context(cluster_arn=cluster, task_definition_roles=self.roles)
        self.tags = {TAG_SESSION: SESSION, TAG_GENERATION: "1"}
        self.names: dict[str, str] = {}  # moto's ids -> the stack's
        self.calls: list[Call] = []  # the driver's requests, as sent
        task_arn = f"{cluster.replace(':cluster/', ':task/')}/0123456789abcdef"
        eni = {"name": "privateIPv4Address", "value": "10.40.16.7"}
        self.running = {
            "taskArn": task_arn,
            "lastStatus": "RUNNING",
            "desiredStatus": "RUNNING",
            "attachments": [{"type": "ElasticNetworkInterface", "details": [eni]}],
        }

    def moto(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint)  # type: ignore[call-overload]

    def requests(self) -> dict[str, set[Request]]:
        with iam.recording() as calls:  # the driver's clients: created while recording
            clients = {service: self.moto(service) for service in ("ec2", "efs", "s3")}
            clients["ecs"] = boto3.client("ecs", region_name=REGION)
            retry_efs = boto3.client("efs", region_name=REGION)
        settings = self.settings
        if self.efs_mode:
            moto_fs = self.moto("efs").create_file_system(CreationToken=uuid.uuid4().hex)
            assert settings.fargate_efs_file_system_id
            self.names[moto_fs["FileSystemId"]] = settings.fargate_efs_file_system_id
            settings = settings.model_copy(
                update={"fargate_efs_file_system_id": moto_fs["FileSystemId"]}
            )
        assert settings.artifact_bucket
        self.moto("s3").create_bucket(Bucket=settings.artifact_bucket)
        self.monkeypatch.setattr(composition, "_client", lambda service, *_: clients[service])
        self.monkeypatch.setattr("openagents.sandbox.client.SandboxClient", _fake_sandboxd)
        driver: Any = BUILD_DRIVER(settings, b"k" * 32)
        ecs, efs = Stubber(clients["ecs"]), Stubber(retry_efs)
        with ecs, efs:
            self._drive(driver, ecs, efs, retry_efs)
            ecs.assert_no_pending_responses()
            efs.assert_no_pending_responses()
        requests: dict[str, set[Request]] = {method: set() for method in DRIVER_METHODS}
        self.calls = [c for c in calls if c.function.startswith("driver:")]
        for call in calls:
            if call.function.startswith("driver:"):
                method = call.function.removeprefix("driver:")
                requests[method] |= iam_requests(translate(call, self.names), self.ctx)
        if not self.efs_mode:  # a snapshot that fails is discarded: DeleteSnapshot, as delete
            requests["snapshot"] |= requests["delete_snapshot"]
        return requests

    def _drive(self, driver: Any, ecs: Stubber, efs: Stubber, retry_efs: Any) -> None:
        def run(method: str, call: Callable[[], Any]) -> Any:
            return iam.attributed(f"driver:{method}", call)()

        described = {"tasks": [self.running], "failures": []}
        if self.efs_mode:
            self._stub_session_task_definition(driver, ecs)
        ecs.add_response("run_task", {"tasks": [{"taskArn": self.running["taskArn"]}]})
        handle: SandboxHandle = run("start", lambda: driver.start(SESSION, 1))
        if self.efs_mode:  # a retried create finds the access point by its client token
            self._stub_existing_access_point(efs, handle)
            storage = driver._storages["efs"]  # the EFS strategy (sandbox/fargate_efs.py)
            self.monkeypatch.setattr(storage, "_efs", retry_efs)
            assert run("start", lambda: storage._access_point(SESSION)) == handle.volume_id
        ecs.add_response("describe_tasks", described)
        run("probe", lambda: driver.probe(handle))
        ecs.add_response("describe_tasks", described)  # a handle with no endpoint yet
        run("client", lambda: driver.client(handle))
        ready = handle.model_copy(update={"endpoint": "http://10.40.16.7:8080"})
        if not self.efs_mode:  # the volume is found by its tags (ECS reported no attachment)
            tags = [{"Key": k, "Value": v} for k, v in self.tags.items()]
            volume = self.moto("ec2").create_volume(
                AvailabilityZone=f"{REGION}a",
                Size=20,
                TagSpecifications=[{"ResourceType": "volume", "Tags": tags}],
            )["VolumeId"]
            self.ctx.volume_tags[volume] = self.tags
            ecs.add_response("describe_tasks", described)
        ref: SnapshotRef = run("snapshot", lambda: driver.snapshot(ready))
        self.ctx.snapshot_tags[ref.id] = self.tags
        if self.efs_mode:
            run("restore", lambda: driver.restore(ready, ref))
        run("delete_snapshot", lambda: driver.delete_snapshot(ref))
        ecs.add_response("stop_task", {"task": self.running})
        run("stop", lambda: driver.stop(handle))

    def _stub_session_task_definition(self, driver: Any, ecs: Stubber) -> None:
        base = self.synth.stack.sandbox.family
        family = f"{base}-{SESSION}"
        ecs.add_response(
            "describe_task_definition",
            {
                "taskDefinition": {
                    "taskDefinitionArn": self.settings.fargate_task_definition,
                    "family": base,
                    "status": "ACTIVE",
                    "taskRoleArn": self.roles[0],
                    "executionRoleArn": self.roles[1],
                    "networkMode": "awsvpc",
                    "containerDefinitions": [{"name": "sandboxd", "image": "sandboxd:1"}],
                    "volumes": [{"name": "workspace", "configuredAtLaunch": True}],
                }
            },
        )
        ecs.add_client_error("describe_task_definition", "ClientException", "Unable to describe")
        ecs.add_response(
            "register_task_definition",
            {"taskDefinition": {"taskDefinitionArn": f"{family}:1", "family": family}},
        )

    def _stub_existing_access_point(self, efs: Stubber, handle: SandboxHandle) -> None:
        efs.add_client_error("create_access_point", "AccessPointAlreadyExists", "exists", 409)
        point = {
            "AccessPointId": handle.volume_id,
            "ClientToken": access_point_client_token(SESSION),
            "FileSystemId": self.settings.fargate_efs_file_system_id,
        }
        efs.add_response("describe_access_points", {"AccessPoints": [point]})


# ------------------------------------------------------------------ 3. the comparison


def stage_names(flow: Flow, function: Function) -> dict[str, str]:
    """Moto's names -> the names the stack gives the function (its resolved environment)."""
    env = function.environment
    machines = json.loads(env["OPENAGENTS_STATE_MACHINES"])
    values = {
        "table": env["OPENAGENTS_TABLE_NAME"],
        "bucket": env["OPENAGENTS_ARTIFACT_BUCKET"],
        "bus": env["OPENAGENTS_EVENT_BUS_NAME"],
        **{role: env[setting] for role, setting in SECRET_SETTINGS.items() if setting in env},
        **(
            {"agent-function": env["OPENAGENTS_AGENT_FUNCTION_ARN"]}
            if "OPENAGENTS_AGENT_FUNCTION_ARN" in env
            else {}
        ),
        **{f"machine:{name}": arn for name, arn in machines.items()},
    }
    # a secret the function is not given cannot be read by it: its name stays moto's (and no
    # statement allows it)
    return {
        moto_name: values[role] for moto_name, role in flow.moto_names.items() if role in values
    }


def declared_driver_methods(name: str) -> set[str]:
    from infra.constructs.api import NEEDS
    from infra.constructs.workflows import SPECS

    if name == AGENT:
        return set(agent_construct.NEEDS.driver)
    needs = NEEDS if name == API else SPECS[name].needs
    return set(needs.driver)


def check_function(synth: Synth, function: Function, used: set[Request], methods: set[str]) -> None:
    durable = DURABLE_SIDS.get(function.name, set())
    code = [
        s
        for s in function.statements
        if s.sid not in RUNTIME_SIDS | AGENT_TURN_SIDS | durable and not set(s.actions) <= XRAY
    ]
    label = f"{synth.stack.stack_name}/{function.name}"
    # every request is allowed by a statement, and no resource policy denies it
    missing = sorted(
        (r.action, r.resource, r.context) for r in used if not any(s.matches(r) for s in code)
    )
    assert not missing, f"{label}: used but not granted: {missing}"
    resolve = Resolver(synth.data)
    for request in used:
        assert not iam.denied_by_resource_policy(synth.data, resolve, request, function.role_arn)
    # every (statement, action, resource) allows some request
    unused = [
        (s.sid, action, resource)
        for s in code
        for action in s.actions
        for resource in s.resources
        if not any(Statement(s.sid, [action], [resource], s.conditions).matches(r) for r in used)
    ]
    assert not unused, f"{label}: granted but never used: {unused}"
    for statement in code:
        for action in statement.actions:
            assert "*" not in action, (label, statement.sid, action)
            if statement.resources == ["*"]:
                assert action in NO_RESOURCE_LEVEL, (label, statement.sid, action)
    # the runtime's own statements
    runtime = {s.sid: s for s in function.statements if s.sid in RUNTIME_SIDS}
    assert set(runtime) == RUNTIME_SIDS, label
    assert runtime["WriteOwnLogs"].resources == [function.log_group]
    assert set(runtime["WriteOwnLogs"].actions) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert runtime["LambdaVpcEni"].resources == ["*"]
    assert durable <= {s.sid for s in function.statements}, label  # pinned in test_agent.py
    xray = [s for s in function.statements if set(s.actions) == XRAY]
    assert len(xray) == 1, label
    assert xray[0].resources == ["*"], label
    # the driver methods the function declares are the ones it was seen calling
    assert declared_driver_methods(function.name) == methods, label


def function_requests(flow: Flow, function: Function) -> set[Request]:
    """What one function's own calls (the flow's, not the driver's) ask IAM for."""
    names = stage_names(flow, function)
    return set().union(
        *(
            iam_requests(translate(c, names), None)
            for c in flow.calls
            if c.function == function.name
        )
    )


@pytest.mark.parametrize("stage", ["dev", "ext"])
def test_every_function_role_grants_exactly_what_it_uses(
    stage: str,
    flow: Flow,
    request: pytest.FixtureRequest,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the flow's calls and the Fargate driver's requests for this stage's settings
    synth: Synth = request.getfixturevalue(stage)
    driver_requests = FargateScenario(synth, moto_endpoint, monkeypatch).requests()
    for name, function in functions(synth).items():
        # When a function's calls are turned into IAM requests on the stack's resources
        used = function_requests(flow, function)
        methods = flow.driver.methods(name)
        for method in methods:
            used |= driver_requests[method]
        # Then its role allows exactly those
        assert used, name
        check_function(synth, function, used, methods)


def test_the_flow_covers_every_catalog_function_and_driver_method(flow: Flow) -> None:
    assert {c.function for c in flow.calls} == set(HANDLERS)
    seen = {method for _, method in flow.driver.calls}
    assert seen >= {"start", "probe", "stop", "snapshot", "delete_snapshot"}, seen


def test_functions_share_one_sandbox_configuration(stages: tuple[Synth, ...]) -> None:
    """The API and the workflow tasks drive the same sandboxes: same Fargate settings."""
    for synth in stages:
        envs = [f.environment for f in functions(synth).values()]
        fargate = [
            {
                k: v
                for k, v in env.items()
                if ("FARGATE" in k or "SANDBOX_TOKEN" in k) and "SNAPSHOT_WAIT" not in k
            }
            for env in envs
        ]
        assert all(f == fargate[0] for f in fargate[1:]), synth.stack.stack_name
        assert {env["OPENAGENTS_STATE_MACHINES"] for env in envs} == {
            envs[0]["OPENAGENTS_STATE_MACHINES"]
        }


def test_no_function_puts_events_the_outbox_does(flow: Flow, dev: Synth) -> None:
    """Every domain event of the flow went into the table's outbox (the pipe publishes them):
    no function called EventBridge, so no function role is granted events:PutEvents (the
    comparison above would fail on an unused grant)."""
    assert [c for c in flow.calls if c.service == "events"] == []
    writes = [c for c in flow.calls if c.operation == "TransactWriteItems"]
    outboxed = {
        put["Put"]["Item"]["sk"]["S"][:2]
        for c in writes
        for put in c.params["TransactItems"]
        if "Put" in put
    }
    assert "O#" in outboxed
    for function in functions(dev).values():
        assert not [s for s in function.statements if "events:PutEvents" in s.actions]


def test_recorder_sees_pynamodb_and_boto3_calls(flow: Flow) -> None:
    """The hook itself: if botocore or PynamoDB stop creating clients this way, fail loudly."""
    seen = {(c.service, c.operation) for c in flow.calls}
    assert ("dynamodb", "TransactWriteItems") in seen
    assert ("s3", "PutObject") in seen
    assert ("stepfunctions", "StartExecution") in seen


# ------------------------------------------------------------------ 4. the sandbox's own reach


def sandbox_roles(synth: Synth) -> dict[str, str]:
    """The roles a sandbox task runs with: logical id -> what it is."""
    sandbox = synth.stack.sandbox
    roles = {synth.logical_id(sandbox.execution_role): "execution"}
    if sandbox.task_role is not None:
        roles[synth.logical_id(sandbox.task_role)] = "task"
    return roles


@pytest.mark.parametrize("stage", ["dev", "ext", "closed"])
def test_a_sandbox_task_is_started_with_its_token_and_session_only(
    stage: str, request: pytest.FixtureRequest, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The RunTask the driver sends: the one secret a sandbox gets is its own per-generation
    token (a container override), nothing else is overridden (no role, no command), and the
    task lands in the sandbox subnets with the sandbox security group and no public IP."""
    synth: Synth = request.getfixturevalue(stage)
    scenario = FargateScenario(synth, moto_endpoint, monkeypatch)
    requests = scenario.requests()
    (run,) = [c for c in scenario.calls if c.operation == "RunTask"]
    overrides = run.params["overrides"]
    assert set(overrides) == {"containerOverrides"}  # no taskRoleArn/executionRoleArn/cpu
    (container,) = overrides["containerOverrides"]
    assert set(container) == {"name", "environment"}  # no command, no environmentFiles
    assert container["name"] == "sandboxd"
    environment = {e["name"]: e["value"] for e in container["environment"]}
    assert environment == {
        "SANDBOXD_TOKEN": sandbox_token(b"k" * 32, SESSION, 1),
        "OPENAGENTS_SESSION_ID": SESSION,
    }
    resolve = Resolver(synth.data)
    sandbox = synth.stack.sandbox
    network = run.params["networkConfiguration"]["awsvpcConfiguration"]
    assert network["assignPublicIp"] == "DISABLED"
    assert network["securityGroups"] == [resolve({"Ref": synth.logical_id(sandbox.sandbox_sg)})]
    subnets = sandbox.vpc.isolated_subnets if sandbox.config.sandbox_isolated else None
    expected = subnets or sandbox.vpc.private_subnets
    assert network["subnets"] == [resolve({"Ref": synth.logical_id(s)}) for s in expected]
    # the roles the task runs with are the only ones passed: the execution role, and on EFS the
    # mount-only task role (EBS: none at all)
    passed = {r.resource for r in requests["start"] if r.action == "iam:PassRole"}
    tasks = {resolve({"Fn::GetAtt": [logical, "Arn"]}) for logical in sandbox_roles(synth)}
    infrastructure = resolve({"Fn::GetAtt": [synth.logical_id(sandbox.infrastructure_role), "Arn"]})
    assert passed == tasks | ({infrastructure} if sandbox.file_system is None else set())


@pytest.mark.parametrize("stage", ["dev", "ext"])
def test_the_sandbox_roles_allow_nothing_the_control_plane_does(
    stage: str,
    flow: Flow,
    request: pytest.FixtureRequest,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request any control-plane function makes (the table, message bodies, bundles,
    snapshots, secrets, workflows, events, ECS, EC2, EFS) is refused to the sandbox's roles,
    and the token key's own policy denies them too."""
    synth: Synth = request.getfixturevalue(stage)
    driver_requests = FargateScenario(synth, moto_endpoint, monkeypatch).requests()
    used: set[Request] = set().union(*driver_requests.values())
    for function in functions(synth).values():
        used |= function_requests(flow, function)
    assert {r.action.split(":")[0] for r in used} >= {
        "dynamodb", "s3", "secretsmanager", "states", "ecs", "iam",
    }  # fmt: skip
    resolve = Resolver(synth.data)
    for logical, kind in sandbox_roles(synth).items():
        statements = iam.role_statements(synth.data, logical, resolve)
        allowed = sorted(
            (r.action, r.resource) for r in used if any(s.matches(r) for s in statements)
        )
        assert allowed == [], (stage, kind, allowed)
        key = resolve({"Ref": synth.logical_id(synth.stack.sandbox.token_secret)})
        read_key = Request.of("secretsmanager:GetSecretValue", key)
        role_arn = resolve({"Fn::GetAtt": [logical, "Arn"]})
        assert iam.denied_by_resource_policy(synth.data, resolve, read_key, role_arn), kind
        # and what they do allow: the image and the log group, or mounting access points
        actions = {a for s in statements for a in s.actions}
        if kind == "execution":
            assert {a.split(":")[0] for a in actions} == {"ecr", "logs"}, actions
        else:
            assert actions == {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"}
