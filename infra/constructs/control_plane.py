"""What every control-plane function (the API and the workflow tasks) is given: its settings and
exactly the permissions its code uses, declared as :class:`Needs`.

State machine ARNs are computed from their names (``openagents-<stage>-<machine>``) rather than
referenced: the provisioner starts the lifecycle loop, the lifecycle function restores through
the provisioning workflow, and each workflow invokes its function, so references would make a
CloudFormation cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from openagents.workflows import catalog

from infra import nag
from infra.config import StageConfig
from infra.constructs.data import (
    ATTACHMENTS_PREFIX,
    BUNDLES_PREFIX,
    DIFFS_PREFIX,
    MESSAGES_PREFIX,
    Data,
)
from infra.constructs.events import Events
from infra.constructs.function import ServiceFunction
from infra.constructs.sandbox import Sandbox
from infra.nag import acknowledge

METRICS_NAMESPACE = "OpenAgents"  # openagents.observability.NAMESPACE


@dataclass(frozen=True)
class Needs:
    """The AWS actions one function's code performs (tests/infra/test_least_privilege.py records
    them and fails on any difference)."""

    table: tuple[str, ...] = ()  # DynamoDB actions on the table's items
    indexes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # index -> actions
    message_bodies: tuple[str, ...] = ()  # S3 actions on messages/*
    bundles: tuple[str, ...] = ()  # S3 actions on bundles/* (archive git bundles)
    diffs: tuple[str, ...] = ()  # S3 actions on diffs/* (the sessions' cached diffs)
    attachments: tuple[str, ...] = ()  # S3 actions on attachments/* (files in user messages)
    lists_attachments: bool = False  # ListBucket under attachments/ (a deleted session's files)
    secrets: tuple[str, ...] = ()  # secrets it reads (names in ControlPlane.secrets)
    starts: tuple[str, ...] = ()  # state machines (catalog names) it starts
    driver: tuple[str, ...] = ()  # FargateDriver methods it calls
    token_key: bool = False  # reads the sandbox token key (sandboxd calls, or any driver use)
    # No function puts events on the bus: the store writes them to the table's outbox and the
    # pipe publishes them (infra/constructs/outbox.py), so no role is granted events:PutEvents.


def state_machine_name(config: StageConfig, machine: str) -> str:
    return f"openagents-{config.stage}-{machine}"


def state_machine_arn(scope: Construct, config: StageConfig, machine: str) -> str:
    return Stack.of(scope).format_arn(
        service="states",
        resource="stateMachine",
        resource_name=state_machine_name(config, machine),
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


@dataclass(frozen=True)
class SecretSetting:
    """A secret a function may read, the setting that names it (its ARN), and the plain
    settings that go with it."""

    secret: secretsmanager.ISecret
    setting: str  # e.g. OPENAGENTS_ORIGIN_SECRET_ARN
    settings: Mapping[str, str] = field(default_factory=dict)  # e.g. the GitHub App's id


# A secret a stage may leave out: a function that lists it reads it only when it is configured.
OPTIONAL_SECRETS = frozenset({"github-app"})
# How a function reaches GitHub: the token, and the GitHub App's key when the stage has one.
GITHUB_CREDENTIALS = ("github-token", "github-app")


class ControlPlane:
    """Settings and grants for the control-plane functions of one stack."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        data: Data,
        sandbox: Sandbox,
        events: Events,
        secrets: Mapping[str, SecretSetting] | None = None,
    ) -> None:
        self._scope, self.config, self.data = scope, config, data
        self.sandbox, self.events = sandbox, events
        self.secrets = dict(secrets or {})

    @property
    def state_machine_arns(self) -> dict[str, str]:
        return {
            machine: state_machine_arn(self._scope, self.config, machine)
            for machine in sorted(catalog.STATE_MACHINES)
        }

    def environment(self, service: str, needs: Needs | None = None) -> dict[str, str]:
        """``OPENAGENTS_*`` (``openagents.settings``) and Powertools settings; the ARN of each
        secret ``needs`` reads."""
        stack = Stack.of(self._scope)
        settings: dict[str, str] = {}
        for name in self._secrets_of(needs):
            settings[self.secrets[name].setting] = self.secrets[name].secret.secret_arn
            settings.update(self.secrets[name].settings)
        return {
            **settings,
            "OPENAGENTS_MODE": "aws",
            "OPENAGENTS_REGION": Aws.REGION,
            **self.data.environment,
            **self.sandbox.environment,
            "OPENAGENTS_STATE_MACHINES": stack.to_json_string(self.state_machine_arns),
            "OPENAGENTS_EVENT_BUS_NAME": self.events.bus.event_bus_name,
            "OPENAGENTS_PROVISION_ON_CREATE": "true",
            "POWERTOOLS_SERVICE_NAME": service,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        }

    def _secrets_of(self, needs: Needs | None) -> list[str]:
        """The secrets ``needs`` reads that this stack has (an optional one may be absent)."""
        names = needs.secrets if needs else ()
        unknown = set(names) - set(self.secrets) - OPTIONAL_SECRETS
        if unknown:
            raise ValueError(f"no such control-plane secrets: {sorted(unknown)}")
        return [name for name in names if name in self.secrets]

    def statements(self, needs: Needs) -> list[iam.PolicyStatement]:
        table_arn = self.data.table.table_arn
        statements: list[iam.PolicyStatement] = []
        if needs.table:
            statements.append(
                iam.PolicyStatement(
                    sid="TableItems", actions=list(needs.table), resources=[table_arn]
                )
            )
        by_actions: dict[tuple[str, ...], list[str]] = {}
        for index, actions in sorted(needs.indexes.items()):
            by_actions.setdefault(tuple(actions), []).append(self.data.index_arn(index))
        for number, (actions, arns) in enumerate(sorted(by_actions.items())):
            statements.append(
                iam.PolicyStatement(
                    sid=f"TableIndexes{number or ''}", actions=list(actions), resources=arns
                )
            )
        objects = (  # S3 actions on the artifact bucket's prefixes, each its own statement
            ("MessageBodies", needs.message_bodies, MESSAGES_PREFIX),
            ("ArchiveBundles", needs.bundles, BUNDLES_PREFIX),
            ("CachedDiffs", needs.diffs, DIFFS_PREFIX),
            ("Attachments", needs.attachments, ATTACHMENTS_PREFIX),
        )
        for sid, actions, prefix in objects:
            if actions:
                statements.append(
                    iam.PolicyStatement(
                        sid=sid,
                        actions=list(actions),
                        resources=[self.data.artifacts.arn_for_objects(f"{prefix}*")],
                    )
                )
        if needs.lists_attachments:
            statements.append(
                iam.PolicyStatement(
                    sid="ListAttachments",
                    actions=["s3:ListBucket"],
                    resources=[self.data.artifacts.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{ATTACHMENTS_PREFIX}*"]}},
                )
            )
        if secrets := self._secrets_of(needs):
            statements.append(
                iam.PolicyStatement(
                    sid="ReadSecrets",
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[self.secrets[name].secret.secret_arn for name in secrets],
                )
            )
        if needs.starts:
            machines = self.state_machine_arns
            statements.append(
                iam.PolicyStatement(
                    sid="StartWorkflows",
                    actions=["states:StartExecution"],
                    resources=[machines[machine] for machine in needs.starts],
                )
            )
        statements += self.sandbox.driver_statements(needs.driver)
        return statements

    def star_reason(self, needs: Needs) -> str:
        return self.sandbox.star_reason(needs.driver)

    def grant(self, function: ServiceFunction, needs: Needs) -> None:
        """What cannot be a plain statement: the token key's allow-list, and the cdk-nag
        acknowledgements the driver statements need."""
        if needs.token_key:
            self.sandbox.grant_token_read(function.role)
        self.sandbox.acknowledge_driver_statements(function.role, needs.driver)
        if needs.attachments:
            acknowledge(
                function.role,
                "IAM5",
                "Attachments are objects under attachments/<userId>/<sessionId>/<id>: the prefix "
                "is the narrowest resource",
                nag.resource(
                    self._scope, self.data.artifacts.arn_for_objects(f"{ATTACHMENTS_PREFIX}*")
                ),
            )
        if needs.bundles:
            acknowledge(
                function.role,
                "IAM5",
                "Archive bundles are objects under bundles/<sessionId>/<generation>.bundle: "
                "the prefix is the narrowest resource",
                nag.resource(
                    self._scope, self.data.artifacts.arn_for_objects(f"{BUNDLES_PREFIX}*")
                ),
            )
