"""Sandbox: where each session's sandbox runs, and who may reach it.

- **Network.** A VPC over two AZs: public subnets that only hold the NAT gateway(s), private
  subnets for the sandbox tasks and the control-plane Lambdas. Sandboxes need the internet
  (``git clone`` from GitHub, package registries), so egress is NAT; the free S3 and DynamoDB
  gateway endpoints keep image-layer pulls (ECR serves layers from S3), snapshots and table
  traffic off the NAT's per-GB charge. Flow logs go to the access-log bucket.
- **Security groups.** ``ControlPlane`` (API and provisioner Lambdas): no ingress, egress HTTPS
  and sandboxd's port to the sandboxes only. ``Sandbox``: ingress on sandboxd's port from
  ``ControlPlane`` only (not from other sandboxes), all egress. ``Efs`` (toggle): NFS from
  ``Sandbox`` only.
- **Tasks.** One ECS cluster; one Fargate task definition (arm64, the ``sandbox/`` image): a
  non-essential ``workspace-init`` container (root, ``chown 1000:1000 /workspace``, read-only
  root file system) that ``sandboxd`` waits for (``SUCCESS``), because a managed EBS volume is
  mounted root-owned; the ``workspace`` volume is ``configuredAtLaunch`` (the driver passes a
  managed EBS volume on every RunTask, or replaces it with the session's EFS access point).
- **Egress** (``sandboxEgress``). ``open``: the sandboxes share the private subnets and their
  NAT route. ``none``/``proxy``: the sandboxes get subnets of their own (``Sandbox``, isolated:
  no route to the NAT), interface endpoints for exactly what the task's ENI needs (ECR api and
  dkr, CloudWatch Logs) and an S3 gateway endpoint whose policy admits only ECR's layer bucket;
  their security group sends 443 (to those endpoints, the only routes), NFS to the EFS group,
  and with ``proxy`` the proxy's port, which ``HTTP(S)_PROXY`` in the container names.
- **Roles.** With EBS, no task role at all (agent code runs in the task: no credentials endpoint,
  nothing to steal); with EFS, a task role that may mount access points and nothing else;
  execution role (pull the image, write the log group); the ECS infrastructure role for
  managed EBS volumes (``AmazonECSInfrastructureRolePolicyForVolumes``).
- **Token key.** A generated secret the sandbox bearer tokens are derived from
  (``HMAC(key, "sandbox:<session>:<generation>")``). Only roles given
  :meth:`Sandbox.grant_token_read` may read it: the secret's resource policy denies everyone else.

This module composes the parts, each in a sibling module that adds to this construct (so the
logical ids stay this construct's): the network ``sandbox_network``, the runtime (cluster, task
definition, roles, EFS) ``sandbox_task``, the driver's IAM ``sandbox_driver_iam``, and what the
driver and the stack agree on (container name, port, volume name, tags) ``sandbox_contract``,
read from ``openagents.sandbox.fargate_storage`` (``FargateConfig``) so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable

import jsii
from aws_cdk import IStableListProducer, Lazy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import StageConfig
from infra.constructs import sandbox_network, sandbox_task
from infra.constructs.function import ControlPlaneNetwork, removal, retention
from infra.constructs.sandbox_contract import (
    CONTAINER_NAME,
    ECS,
    ECS_TASKS,
    NFS_PORT,
    SANDBOX_PORT,
    SANDBOX_UID,
    TAG_SESSION,
    VOLUME_NAME,
    WORKSPACE,
)
from infra.constructs.sandbox_driver_iam import DRIVER_METHODS, DriverPolicy
from infra.constructs.sandbox_network import ECR_LAYER_BUCKET, SANDBOX_SUBNETS
from infra.constructs.sandbox_task import (
    DROPPED_CAPABILITIES,
    IMAGE_DIR,
    INIT_CONTAINER,
    NO_PROXY,
    PROXY_VARIABLES,
    VOLUMES_POLICY,
)
from infra.nag import acknowledge

__all__ = [  # the names the stack, the other constructs and the tests read from here
    "CONTAINER_NAME",
    "DRIVER_METHODS",
    "DROPPED_CAPABILITIES",
    "ECR_LAYER_BUCKET",
    "ECS",
    "ECS_TASKS",
    "IMAGE_DIR",
    "INIT_CONTAINER",
    "NFS_PORT",
    "NO_PROXY",
    "PROXY_VARIABLES",
    "SANDBOX_PORT",
    "SANDBOX_SUBNETS",
    "SANDBOX_UID",
    "TAG_SESSION",
    "VOLUMES_POLICY",
    "VOLUME_NAME",
    "WORKSPACE",
    "Sandbox",
]


@jsii.implements(IStableListProducer)
class _RoleArns:
    """The ARNs of the roles allowed to read the token key, resolved at synth time."""

    def __init__(self, roles: list[iam.IRole]) -> None:
        self._roles = roles

    def produce(self) -> list[str] | None:
        return [role.role_arn for role in self._roles] or None


class Sandbox(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        access_logs: s3.IBucket,
        artifacts: s3.IBucket,
    ) -> None:
        super().__init__(scope, id)
        self.config = config
        self.artifacts = artifacts
        self.vpc = sandbox_network.build_vpc(self, config, access_logs)
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        # where the sandbox tasks run: the control plane's subnets, or their own isolated ones
        self.sandbox_subnets = sandbox_network.sandbox_subnets(config)
        self.control_plane_sg, self.sandbox_sg = sandbox_network.build_security_groups(
            self, self.vpc, config
        )
        self.endpoint_sg: ec2.SecurityGroup | None = None
        if config.sandbox_isolated:
            self.endpoint_sg = sandbox_network.build_sandbox_endpoints(
                self, self.vpc, config, self.sandbox_sg, self.control_plane_sg
            )
        self.network = ControlPlaneNetwork(self.vpc, self.subnets, self.control_plane_sg)
        self._readers: list[iam.IRole] = []
        self.token_secret = self._build_token_secret()
        self.cluster = sandbox_task.build_cluster(self, self.vpc, config)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config), removal_policy=removal(config)
        )
        self.roles = sandbox_task.build_roles(self, config)
        self.task_role = self.roles.task
        self.execution_role = self.roles.execution
        self.infrastructure_role = self.roles.infrastructure
        self.file_system: efs.FileSystem | None = None
        if config.sandbox_storage == "efs":
            self.file_system = sandbox_task.build_file_system(
                self, self.vpc, config, self.sandbox_sg, self.task_role
            )
        if config.sandbox_isolated:
            sandbox_network.restrict_sandbox_egress(
                self.sandbox_sg, self.vpc, config, self.file_system
            )
        self.task_definition = sandbox_task.build_task_definition(
            self, config, self.roles, self.log_group
        )
        self.driver_policy = DriverPolicy(
            self, self.cluster, self.family, self.roles, self.file_system, artifacts
        )

    # ------------------------------------------------------------------ token key

    def _build_token_secret(self) -> secretsmanager.Secret:
        secret = secretsmanager.Secret(
            self,
            "TokenKey",
            description="Open Agents: key the per-sandbox bearer tokens are derived from",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
        )
        secret.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyTheControlPlaneReadsTheKey",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["secretsmanager:GetSecretValue"],
                resources=["*"],
                conditions={
                    "ArnNotEquals": {
                        "aws:PrincipalArn": Lazy.list(_RoleArns(self._readers)),
                    }
                },
            )
        )
        acknowledge(
            secret,
            "SMG4",
            "Rotating the token key would invalidate the bearer token of every running sandbox "
            "(tokens are derived from it when a sandbox starts); sandboxd holds no other secret",
        )
        return secret

    def grant_token_read(self, role: iam.IRole) -> None:
        """Let ``role`` read the token key (and keep it on the secret's allow-list)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="SandboxTokenKey",
                actions=["secretsmanager:GetSecretValue"],
                resources=[self.token_secret.secret_arn],
            )
        )
        self._readers.append(role)

    # ------------------------------------------------------------------ the driver's view

    @property
    def family(self) -> str:
        return sandbox_task.family(self.config)

    @property
    def environment(self) -> dict[str, str]:
        """``OPENAGENTS_*`` settings of the Fargate driver (``openagents.settings``)."""
        stack = Stack.of(self)
        env = {
            "OPENAGENTS_SANDBOX_DRIVER": "fargate",
            "OPENAGENTS_SANDBOX_TOKEN_SECRET_ARN": self.token_secret.secret_arn,
            "OPENAGENTS_FARGATE_CLUSTER": self.cluster.cluster_name,
            "OPENAGENTS_FARGATE_TASK_DEFINITION": self.task_definition.task_definition_arn,
            "OPENAGENTS_FARGATE_SUBNETS": stack.to_json_string(self.sandbox_subnet_ids),
            "OPENAGENTS_FARGATE_SECURITY_GROUPS": stack.to_json_string(
                [self.sandbox_sg.security_group_id]
            ),
            "OPENAGENTS_FARGATE_STORAGE": self.config.sandbox_storage,
            "OPENAGENTS_FARGATE_VOLUME_SIZE_GIB": str(self.config.sandbox_volume_gib),
        }
        if self.file_system is not None:
            env["OPENAGENTS_FARGATE_EFS_FILE_SYSTEM_ID"] = self.file_system.file_system_id
        else:
            env["OPENAGENTS_FARGATE_EBS_ROLE_ARN"] = self.roles.infrastructure.role_arn
        return env

    @property
    def sandbox_subnet_ids(self) -> list[str]:
        return sandbox_network.sandbox_subnet_ids(self.vpc, self.config)

    def driver_statements(self, methods: Iterable[str]) -> list[iam.PolicyStatement]:
        """What the Fargate driver's ``methods`` need (``sandbox_driver_iam``)."""
        return self.driver_policy.driver_statements(methods)

    def star_reason(self, methods: Iterable[str]) -> str:
        """Why :meth:`driver_statements` may add ``Resource::*`` for ``methods``."""
        return self.driver_policy.star_reason(methods)

    def acknowledge_driver_statements(self, role: iam.IRole, methods: Iterable[str]) -> None:
        """The cdk-nag IAM5 findings :meth:`driver_statements` causes on ``role``, with why."""
        self.driver_policy.acknowledge_driver_statements(role, methods)
