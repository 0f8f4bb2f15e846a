"""What the Fargate driver may do: the IAM statements each ``FargateDriver`` method needs, on
the narrowest resources, the reason cdk-nag is told for each wildcard left, and the
``Resource::*`` a method needs (actions with no resource-level permissions).

tests/infra/test_least_privilege.py runs each method against pinned ECS responses and moto,
and checks every request against these statements.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import nag
from infra.constructs.data import SNAPSHOTS_PREFIX
from infra.constructs.sandbox_contract import ECS, ECS_TASKS, TAG_SESSION
from infra.constructs.sandbox_task import Roles, access_point_arns
from infra.nag import acknowledge

DRIVER_METHODS = ("start", "probe", "client", "stop", "snapshot", "restore", "delete_snapshot")


def _statement(
    sid: str, actions: list[str], resources: list[str], **conditions: Any
) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid, actions=actions, resources=resources, conditions=conditions or None
    )


@dataclass(frozen=True)
class DriverPolicy:
    """The driver's permissions on one stage's sandbox resources (``scope``: the Sandbox)."""

    scope: Construct
    cluster: ecs.ICluster
    family: str
    roles: Roles
    file_system: efs.FileSystem | None
    artifacts: s3.IBucket

    def _arn(self, service: str, resource: str, name: str, account: bool = True) -> str:
        return Stack.of(self.scope).format_arn(
            service=service,
            resource=resource,
            resource_name=name,
            account=None if account else "",
        )

    def _family_arns(self) -> list[str]:
        """The task definitions RunTask starts: the sandbox family (EBS), or only the EFS
        driver's per-session copies ``<family>-<session>`` (the base is only described)."""
        if self.file_system is not None:
            return [self._arn("ecs", "task-definition", f"{self.family}-*:*")]
        return [self._arn("ecs", "task-definition", f"{self.family}:*")]

    def driver_statements(self, methods: Iterable[str]) -> list[iam.PolicyStatement]:
        """What the Fargate driver's ``methods`` need, on the narrowest resources.

        ``start``/``probe``/``client``/``stop``/``snapshot``/``restore``/``delete_snapshot``
        are ``FargateDriver`` methods (``token`` needs no AWS call: the key comes from
        ``Sandbox.grant_token_read``).
        """
        wanted = set(methods)
        unknown = wanted - set(DRIVER_METHODS)
        if unknown:
            raise ValueError(f"not FargateDriver methods: {sorted(unknown)}")
        statements = self._task_statements(wanted)
        if self.file_system is None:
            statements += self._ebs_snapshot_statements(wanted)
        else:
            statements += self._efs_snapshot_statements(wanted)
        return statements

    def _task_statements(self, wanted: set[str]) -> list[iam.PolicyStatement]:
        tasks = [self._arn("ecs", "task", f"{self.cluster.cluster_name}/*")]
        on_cluster = {"ecs:cluster": self.cluster.cluster_arn}
        statements = []
        if "start" in wanted:
            statements += [
                _statement(
                    "RunSandboxTasks", ["ecs:RunTask"], self._family_arns(), ArnEquals=on_cluster
                ),
                _statement(
                    "TagSandboxTasksOnRun",
                    ["ecs:TagResource"],
                    tasks,
                    StringEquals={"ecs:CreateAction": "RunTask"},
                ),
                _statement(
                    "PassSandboxTaskRoles",
                    ["iam:PassRole"],
                    [role.role_arn for role in (self.roles.task, self.roles.execution) if role],
                    StringEquals={"iam:PassedToService": ECS_TASKS},
                ),
            ]
            if self.file_system is None:
                statements.append(
                    _statement(
                        "PassVolumeInfrastructureRole",
                        ["iam:PassRole"],
                        [self.roles.infrastructure.role_arn],
                        StringEquals={"iam:PassedToService": ECS},
                    )
                )
            else:
                statements += self._efs_start_statements()
        if wanted & {"probe", "client", "snapshot", "restore"}:
            statements.append(
                _statement(
                    "DescribeSandboxTasks", ["ecs:DescribeTasks"], tasks, ArnEquals=on_cluster
                )
            )
        if "stop" in wanted:
            statements.append(
                _statement("StopSandboxTasks", ["ecs:StopTask"], tasks, ArnEquals=on_cluster)
            )
        return statements

    def _ebs_snapshot_statements(self, wanted: set[str]) -> list[iam.PolicyStatement]:
        tagged = {f"aws:ResourceTag/{TAG_SESSION}": "*"}
        snapshots = [self._arn("ec2", "snapshot", "*", account=False)]
        statements = []
        if "snapshot" in wanted:
            statements += [
                _statement(
                    "FindVolumesAndSnapshots",  # no resource-level permissions
                    ["ec2:DescribeSnapshots", "ec2:DescribeVolumes"],
                    ["*"],
                ),
                # the volume ECS created for the task carries the session tag (tagSpecifications)
                _statement(
                    "SnapshotSandboxVolumes",
                    ["ec2:CreateSnapshot"],
                    [self._arn("ec2", "volume", "*")],
                    StringLike=tagged,
                ),
                _statement(
                    "CreateTaggedSnapshots",
                    ["ec2:CreateSnapshot"],
                    snapshots,
                    StringLike={f"aws:RequestTag/{TAG_SESSION}": "*"},
                ),
                _statement(
                    "TagSnapshotsOnCreate",
                    ["ec2:CreateTags"],
                    snapshots,
                    StringEquals={"ec2:CreateAction": "CreateSnapshot"},
                ),
            ]
        if wanted & {"snapshot", "delete_snapshot"}:  # a failed snapshot is deleted at once
            statements.append(
                _statement(
                    "DeleteSandboxSnapshots", ["ec2:DeleteSnapshot"], snapshots, StringLike=tagged
                )
            )
        return statements

    def _efs_snapshot_statements(self, wanted: set[str]) -> list[iam.PolicyStatement]:
        archives = [self.artifacts.arn_for_objects(f"{SNAPSHOTS_PREFIX}*")]
        actions = {"snapshot": "s3:PutObject", "restore": "s3:GetObject"}
        actions["delete_snapshot"] = "s3:DeleteObject"
        sids = {"snapshot": "Write", "restore": "Read", "delete_snapshot": "Delete"}
        return [
            _statement(f"{sids[method]}SnapshotArchives", [action], archives)
            for method, action in actions.items()
            if method in wanted
        ]

    def _efs_start_statements(self) -> list[iam.PolicyStatement]:
        assert self.file_system is not None
        return [
            iam.PolicyStatement(
                sid="ReadTaskDefinitions",  # no resource-level permissions
                actions=["ecs:DescribeTaskDefinition"],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="RegisterSessionTaskDefinitions",  # no resource-level permissions
                actions=["ecs:RegisterTaskDefinition"],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="TagSessionTaskDefinitionsOnRegister",
                actions=["ecs:TagResource"],
                resources=[self._arn("ecs", "task-definition", f"{self.family}-*:*")],
                conditions={"StringEquals": {"ecs:CreateAction": "RegisterTaskDefinition"}},
            ),
            iam.PolicyStatement(
                sid="SessionAccessPoints",
                actions=[
                    "elasticfilesystem:CreateAccessPoint",
                    "elasticfilesystem:DescribeAccessPoints",
                ],
                resources=[self.file_system.file_system_arn],
            ),
            iam.PolicyStatement(
                sid="TagAccessPointsOnCreate",
                actions=["elasticfilesystem:TagResource"],
                resources=[access_point_arns(self.scope)],
                conditions={
                    "StringEquals": {"elasticfilesystem:CreateAction": "CreateAccessPoint"}
                },
            ),
        ]

    def star_reason(self, methods: Iterable[str]) -> str:
        """Why :meth:`driver_statements` may add ``Resource::*`` for ``methods``."""
        wanted = set(methods)
        reasons = []
        if "start" in wanted and self.file_system is not None:
            reasons.append(
                "ecs:DescribeTaskDefinition and ecs:RegisterTaskDefinition support no "
                "resource-level permissions (the EFS driver copies the sandbox task definition)"
            )
        if "snapshot" in wanted and self.file_system is None:
            reasons.append("nor do ec2:DescribeVolumes and ec2:DescribeSnapshots")
        return "; ".join(reasons)

    def acknowledge_driver_statements(self, role: iam.IRole, methods: Iterable[str]) -> None:
        """The cdk-nag IAM5 findings :meth:`driver_statements` causes on ``role``, with why."""
        wanted = set(methods)
        efs_mode = self.file_system is not None

        def ack(reason: str, arn: str) -> None:
            acknowledge(role, "IAM5", reason, nag.resource(self.scope, arn))

        if wanted & {"start", "probe", "client", "stop", "snapshot", "restore"}:
            ack(
                "Sandbox task ids are only known once RunTask returns: tasks of the sandbox "
                "cluster (also required by the ecs:cluster condition) are the narrowest resource",
                self._arn("ecs", "task", f"{self.cluster.cluster_name}/*"),
            )
        if "start" in wanted and not efs_mode:
            ack(
                "Every revision of the sandbox task definition family: a deploy registers a "
                "new revision while sandboxes of the previous one still run",
                self._family_arns()[0],
            )
        if "start" in wanted and efs_mode:
            ack(
                "Per-session task definition families <family>-<session> (ECS cannot override "
                "EFS volumes per task) are only known at run time",
                self._family_arns()[0],
            )
            ack(
                "Access point ids are only known once CreateAccessPoint returns; tagging is "
                "limited to the create call by elasticfilesystem:CreateAction",
                access_point_arns(self.scope),
            )
        if wanted & {"snapshot", "delete_snapshot"} and not efs_mode:
            ack(
                "Snapshot ids are only known once CreateSnapshot returns: only snapshots "
                "carrying the session tag (condition) may be created, tagged or deleted",
                self._arn("ec2", "snapshot", "*", account=False),
            )
        if "snapshot" in wanted and not efs_mode:
            ack(
                "ECS creates each sandbox's volume at launch: only volumes carrying the "
                "session tag (condition) may be snapshotted",
                self._arn("ec2", "volume", "*"),
            )
        if wanted & {"snapshot", "restore", "delete_snapshot"} and efs_mode:
            ack(
                "Workspace archives are objects under snapshots/<session>/<generation>/: the "
                "prefix is the narrowest resource",
                self.artifacts.arn_for_objects(f"{SNAPSHOTS_PREFIX}*"),
            )
