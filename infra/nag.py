"""cdk-nag 3 (policy-validation plugin) wiring and acknowledgements.

Every acknowledgement names one exact finding id and the reason it is accepted; they sit next
to the resource they are about, in its construct. ``ACKNOWLEDGED`` collects them so tests and
docs can list them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

PACK = "AwsSolutions"


@dataclass(frozen=True)
class Ack:
    path: str
    id: str
    reason: str


ACKNOWLEDGED: list[Ack] = []


def finding_id(rule: str, finding: str | None = None) -> str:
    """``AwsSolutions::AwsSolutions-IAM5[Resource::*]`` style ids, as the report prints them."""
    suffix = f"[{finding}]" if finding else ""
    return f"{PACK}::{PACK}-{rule}{suffix}"


def _render(value: Any) -> str:
    """A resolved template value as cdk-nag prints it: ``<Ref>``, ``<Id.Attr>``, joins flattened."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return f"<{logical}.{attribute}>"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_render(part) for part in parts)
    raise ValueError(f"cannot render {value!r} as a cdk-nag finding")


def resource(scope: IConstruct, value: str) -> str:
    """The ``Resource::...`` finding suffix for a policy resource (an ARN, tokens and all)."""
    return "Resource::" + _render(Stack.of(scope).resolve(value))


def acknowledge(scope: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    rule_id = finding_id(rule, finding)
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))
    ACKNOWLEDGED.append(Ack(scope.node.path, rule_id, reason))


def add_checks(app: App) -> None:
    """Attach the AwsSolutions pack: an unacknowledged finding makes ``app.synth()`` fail."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
