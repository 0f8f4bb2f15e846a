"""cdk-nag 3 (policy-validation plugin) wiring and acknowledgements.

Every acknowledgement names one exact finding id and the reason it is accepted; they sit next
to the resource they are about, in its construct. ``ACKNOWLEDGED`` collects them so tests and
docs can list them.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, App, Validations
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


def acknowledge(scope: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    rule_id = finding_id(rule, finding)
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))
    ACKNOWLEDGED.append(Ack(scope.node.path, rule_id, reason))


def add_checks(app: App) -> None:
    """Attach the AwsSolutions pack: an unacknowledged finding makes ``app.synth()`` fail."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
