"""IAM for the least-privilege gate: resolve a synthesized template to concrete ARNs, turn
recorded AWS SDK calls into the IAM requests AWS authorises (action, resource, condition
context), and evaluate them against a role's synthesized identity policy.

The evaluator covers what the stack's policies use: Allow statements, ``*``/``?`` wildcards in
actions and resources, and the condition operators ``StringEquals``, ``StringLike``,
``ArnEquals``, ``ArnLike``, ``ArnNotEquals``, ``Bool`` and ``Null``. Anything else fails loudly.
"""

from __future__ import annotations

import contextvars
import fnmatch
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import botocore.session

REGION = "us-east-1"
ACCOUNT = "123456789012"
PARTITION = "aws"
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
}


# ---------------------------------------------------------------------- template -> values


class Resolver:
    """Concrete values for a template's intrinsics: every resource gets a plausible physical
    id (``Ref``) and ARN (``Fn::GetAtt``), derived from its logical id."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template["Resources"]

    def _props(self, logical: str) -> dict[str, Any]:
        props: dict[str, Any] = self.resources[logical].get("Properties", {})
        return props

    def ref(self, logical: str) -> str:
        if logical in PSEUDO:
            return PSEUDO[logical]
        kind = self.resources[logical]["Type"]
        name = logical.lower()
        here = f"{REGION}:{ACCOUNT}"
        refs: dict[str, Callable[[], str]] = {
            "AWS::ECS::TaskDefinition": lambda: (
                f"arn:aws:ecs:{here}:task-definition/{self._props(logical)['Family']}:1"
            ),
            "AWS::SecretsManager::Secret": lambda: (
                f"arn:aws:secretsmanager:{here}:secret:{logical}-AbCdEf"
            ),
            "AWS::EC2::Subnet": lambda: f"subnet-{name}",
            "AWS::EC2::SecurityGroup": lambda: f"sg-{name}",
            "AWS::EFS::FileSystem": lambda: f"fs-{name}",
            "AWS::StepFunctions::StateMachine": lambda: (
                f"arn:aws:states:{here}:stateMachine:{self._props(logical)['StateMachineName']}"
            ),
            "AWS::Logs::LogGroup": lambda: str(self._props(logical).get("LogGroupName", name)),
            "AWS::Lambda::Function": lambda: str(self._props(logical).get("FunctionName", name)),
            "AWS::Lambda::Alias": lambda: (
                f"arn:aws:lambda:{here}:function:{self(self._props(logical)['FunctionName'])}"
                f":{self._props(logical)['Name']}"
            ),
        }
        return refs.get(kind, lambda: name)()

    def get_att(self, logical: str, attribute: str) -> str:
        kind = self.resources[logical]["Type"]
        name = self.ref(logical)
        here = f"{REGION}:{ACCOUNT}"
        arns = {
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{logical}",
            "AWS::ECS::Cluster": f"arn:aws:ecs:{here}:cluster/{name}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{here}:table/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::EFS::FileSystem": f"arn:aws:elasticfilesystem:{here}:file-system/{name}",
            "AWS::Lambda::Function": f"arn:aws:lambda:{here}:function:{logical}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{here}:log-group:{name}:*",
            "AWS::Events::EventBus": f"arn:aws:events:{here}:event-bus/{name}",
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if attribute in ("GroupId", "FileSystemId"):
            return name
        return f"<{logical}.{attribute}>"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(item) for item in value]
        if not isinstance(value, dict):
            return value
        if "Ref" in value:
            return self.ref(value["Ref"])
        if "Fn::GetAtt" in value:
            return self.get_att(*value["Fn::GetAtt"])
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(str(self(part)) for part in parts)
        if "Fn::Select" in value:
            index, items = value["Fn::Select"]
            return self(items)[int(index)]
        if "Fn::Split" in value:
            separator, text = value["Fn::Split"]
            return str(self(text)).split(separator)
        return {key: self(item) for key, item in value.items()}


# ---------------------------------------------------------------------- policies


@dataclass(frozen=True)
class Request:
    """One authorisation AWS makes: an action on a resource, with its condition context."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(action: str, resource: str, **context: str) -> Request:
        return Request(action, resource, tuple(sorted(context.items())))


@dataclass
class Statement:
    sid: str | None
    actions: list[str]
    resources: list[str]
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def matches(self, request: Request) -> bool:
        return (
            any(_like(request.action, pattern, case=False) for pattern in self.actions)
            and any(_like(request.resource, pattern) for pattern in self.resources)
            and all(
                _condition(operator, key, expected, dict(request.context))
                for operator, keys in self.conditions.items()
                for key, expected in keys.items()
            )
        )


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _like(value: str, pattern: str, case: bool = True) -> bool:
    if not case:
        value, pattern = value.lower(), pattern.lower()
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _condition(operator: str, key: str, expected: Any, context: dict[str, str]) -> bool:
    wanted = [str(item) for item in _as_list(expected)]
    present = key in context
    if operator == "Null":
        return (not present) is (wanted == ["true"])
    if operator == "ArnNotEquals":
        return present and context[key] not in wanted
    if not present:
        return False
    actual = context[key]
    if operator in ("StringEquals", "ArnEquals"):
        return actual in wanted
    if operator in ("StringLike", "ArnLike"):
        return any(_like(actual, pattern) for pattern in wanted)
    if operator == "Bool":
        return actual.lower() in [w.lower() for w in wanted]
    raise AssertionError(f"condition operator {operator} is not modelled")


def role_statements(template: dict[str, Any], role: str, resolve: Resolver) -> list[Statement]:
    """The Allow statements of every identity policy attached to ``role`` (logical id)."""
    props = template["Resources"][role]["Properties"]
    assert not props.get("ManagedPolicyArns"), f"{role}: managed policies"
    assert not props.get("Policies"), f"{role}: inline policies outside AWS::IAM::Policy"
    statements = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if {"Ref": role} not in resource["Properties"].get("Roles", []):
            continue
        for raw in resource["Properties"]["PolicyDocument"]["Statement"]:
            assert raw["Effect"] == "Allow", raw
            statements.append(
                Statement(
                    sid=raw.get("Sid"),
                    actions=_as_list(raw["Action"]),
                    resources=[str(r) for r in _as_list(resolve(raw["Resource"]))],
                    conditions=resolve(raw.get("Condition", {})),
                )
            )
    return statements


def denied_by_resource_policy(
    template: dict[str, Any], resolve: Resolver, request: Request, principal: str
) -> bool:
    """Whether a secret's resource policy denies ``request`` to ``principal`` (role ARN)."""
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::SecretsManager::ResourcePolicy":
            continue
        secret = resolve(resource["Properties"]["SecretId"])
        if secret != request.resource:
            continue
        for raw in resource["Properties"]["ResourcePolicy"]["Statement"]:
            if raw["Effect"] != "Deny":
                continue
            statement = Statement(
                None, _as_list(raw["Action"]), ["*"], resolve(raw.get("Condition", {}))
            )
            context = dict(request.context) | {"aws:PrincipalArn": principal}
            if statement.matches(Request(request.action, request.resource, tuple(context.items()))):
                return True
    return False


# ---------------------------------------------------------------------- recording


@dataclass(frozen=True)
class Call:
    function: str
    service: str
    operation: str
    params: dict[str, Any]


# A context variable, not a thread-local: FastAPI runs sync routes in worker threads, and
# anyio copies the context into them.
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("function", default=None)


def current_function() -> str | None:
    return _current.get()


def attributed(function: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` whose AWS calls (in its context) are recorded as ``function``'s."""

    def run(*args: Any, **kwargs: Any) -> Any:
        token = _current.set(function)
        try:
            return handler(*args, **kwargs)
        finally:
            _current.reset(token)

    return run


@contextmanager
def recording() -> Iterator[list[Call]]:
    """Record every call made by botocore clients created meanwhile (boto3's and PynamoDB's),
    with the function on whose behalf it ran (``None``: the test itself)."""
    calls: list[Call] = []
    original = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        service = client.meta.service_model.service_name

        def before_parameter_build(model: Any, params: dict[str, Any], **_: Any) -> None:
            calls.append(Call(current_function() or "", service, model.name, dict(params)))

        # the API's own parameters, once per call, before botocore serialises them
        client.meta.events.register("before-parameter-build", before_parameter_build)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        botocore.session.Session.create_client = original  # type: ignore[method-assign]
