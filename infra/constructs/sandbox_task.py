"""The sandbox runtime: the ECS cluster, the sandbox task definition and its roles, the log
group's driver, and the EFS variant of the workspace volume.

The driver's contract (container name, port, volume name) is ``sandbox_contract``. Each function
adds to the :class:`~infra.constructs.sandbox.Sandbox` construct it is given (``scope``), so the
logical ids are the ones that construct has always had.
"""

from __future__ import annotations

import dataclasses

from aws_cdk import Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ROOT, StageConfig
from infra.constructs.function import removal
from infra.constructs.sandbox_contract import (
    CONTAINER_NAME,
    CONTROL_PLANE_SUBNETS,
    ECS,
    ECS_TASKS,
    NFS_PORT,
    SANDBOX_PORT,
    SANDBOX_UID,
    VOLUME_NAME,
    WORKSPACE,
)
from infra.nag import acknowledge

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY = "localhost,127.0.0.1,::1,169.254.170.2"  # loopback, the ECS task metadata endpoint
INIT_CONTAINER = "workspace-init"
IMAGE_DIR = ROOT / "sandbox"
VOLUMES_POLICY = "service-role/AmazonECSInfrastructureRolePolicyForVolumes"
# The linux capabilities sandboxd's container keeps: none (it runs as uid 1000 and needs none)
DROPPED_CAPABILITIES = (ecs.Capability.ALL,)


@dataclasses.dataclass(frozen=True)
class Roles:
    """The sandbox task's roles: ``task`` only with EFS (no credentials endpoint with EBS)."""

    task: iam.Role | None
    execution: iam.Role
    infrastructure: iam.Role


def family(config: StageConfig) -> str:
    return f"openagents-{config.stage}-sandbox"


def build_cluster(scope: Construct, vpc: ec2.IVpc, config: StageConfig) -> ecs.Cluster:
    insights = ecs.ContainerInsights.ENABLED if config.insights else ecs.ContainerInsights.DISABLED
    cluster = ecs.Cluster(scope, "Cluster", vpc=vpc, container_insights_v2=insights)
    if not config.insights:
        acknowledge(
            cluster,
            "ECS4",
            "Container Insights is a stage toggle (context containerInsights, on in prod): "
            "it bills custom metrics per task, and sandbox tasks are short-lived",
        )
    return cluster


def build_roles(scope: Construct, config: StageConfig) -> Roles:
    """The task role (EFS only), the execution role and the ECS infrastructure role."""
    # EBS: no task role at all, so the task has no credentials endpoint. EFS: IAM-authorized
    # mounts need one (its only permission: mounting the session access points).
    task = (
        iam.Role(
            scope,
            "TaskRole",
            assumed_by=iam.ServicePrincipal(ECS_TASKS),
            description="Sandbox tasks: mount EFS access points, nothing else (agent code)",
        )
        if config.sandbox_storage == "efs"
        else None
    )
    execution = iam.Role(
        scope,
        "ExecutionRole",
        assumed_by=iam.ServicePrincipal(ECS_TASKS),
        description="ECS agent for sandbox tasks: pull the image, write the log group",
    )
    infrastructure = iam.Role(
        scope,
        "InfrastructureRole",
        assumed_by=iam.ServicePrincipal(ECS),
        description="ECS creates, attaches and deletes the sandboxes' managed EBS volumes",
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(VOLUMES_POLICY)],
    )
    acknowledge(
        infrastructure,
        "IAM4",
        "AmazonECSInfrastructureRolePolicyForVolumes is the policy AWS maintains for ECS "
        "managed EBS volumes; it only allows volumes ECS itself tags as created and managed",
        f"Policy::arn:<AWS::Partition>:iam::aws:policy/{VOLUMES_POLICY}",
    )
    return Roles(task, execution, infrastructure)


def build_file_system(
    scope: Construct,
    vpc: ec2.IVpc,
    config: StageConfig,
    sandbox_sg: ec2.ISecurityGroup,
    task_role: iam.Role | None,
) -> efs.FileSystem:
    """Workspaces on EFS (the toggle): NFS from the sandboxes only, access points only."""
    security_group = ec2.SecurityGroup(
        scope,
        "EfsSecurityGroup",
        vpc=vpc,
        description="Open Agents sandbox workspaces on EFS: NFS from the sandboxes only",
        allow_all_outbound=False,
    )
    security_group.add_ingress_rule(sandbox_sg, ec2.Port.tcp(NFS_PORT), "NFS from the sandboxes")
    file_system = efs.FileSystem(
        scope,
        "Workspaces",
        vpc=vpc,
        vpc_subnets=CONTROL_PLANE_SUBNETS,
        security_group=security_group,
        encrypted=True,
        performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
        throughput_mode=efs.ThroughputMode.ELASTIC,
        lifecycle_policy=efs.LifecyclePolicy.AFTER_14_DAYS,
        # hibernation's verified copy is the tar.zst in S3, not an EFS backup
        enable_automatic_backups=False,
        removal_policy=removal(config),
        # The policy below already refuses anonymous (non-IAM) mounts, as any file system
        # policy does; this flag only keeps CDK from adding an allow of ClientRootAccess
        # and ClientWrite for every principal.
        allow_anonymous_access=True,
        file_system_policy=iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="TlsOnly",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["*"],
                    conditions={"Bool": {"aws:SecureTransport": "false"}},
                ),
                # the file system root (every session) is never mounted: access points only
                iam.PolicyStatement(
                    sid="AccessPointsOnly",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=[
                        "elasticfilesystem:ClientMount",
                        "elasticfilesystem:ClientWrite",
                        "elasticfilesystem:ClientRootAccess",
                    ],
                    conditions={"Null": {"elasticfilesystem:AccessPointArn": "true"}},
                ),
            ]
        ),
    )
    # The driver mounts per-session access points with IAM authorization: the task role may
    # mount and write through an access point, never the file system root.
    assert task_role is not None
    task_role.add_to_policy(
        iam.PolicyStatement(
            sid="MountSessionAccessPoints",
            actions=["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
            resources=[file_system.file_system_arn],
            conditions={
                "StringLike": {"elasticfilesystem:AccessPointArn": access_point_arns(scope)},
                "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"},
            },
        )
    )
    return file_system


def access_point_arns(scope: Construct) -> str:
    return Stack.of(scope).format_arn(
        service="elasticfilesystem", resource="access-point", resource_name="*"
    )


def build_task_definition(
    scope: Construct, config: StageConfig, roles: Roles, log_group: logs.ILogGroup
) -> ecs.FargateTaskDefinition:
    """The sandbox task: ``workspace-init`` (chown the volume), then ``sandboxd``."""
    definition = ecs.FargateTaskDefinition(
        scope,
        "TaskDefinition",
        family=family(config),
        cpu=config.sandbox_cpu,
        memory_limit_mib=config.sandbox_memory_mib,
        runtime_platform=ecs.RuntimePlatform(
            cpu_architecture=ecs.CpuArchitecture.ARM64,
            operating_system_family=ecs.OperatingSystemFamily.LINUX,
        ),
        task_role=roles.task,
        execution_role=roles.execution,
        volumes=[ecs.Volume(name=VOLUME_NAME, configured_at_launch=True)],
    )
    if roles.task is None:
        # CDK always makes a task role: drop it, and the task definition's reference to it
        definition.node.try_remove_child("TaskRole")
        cfn = definition.node.default_child
        assert isinstance(cfn, ecs.CfnTaskDefinition)
        cfn.add_property_deletion_override("TaskRoleArn")
    # Staged at synth (no Docker needed), built and pushed by `cdk deploy`
    image = ecs.ContainerImage.from_asset(str(IMAGE_DIR), platform=ecr_assets.Platform.LINUX_ARM64)
    mount = ecs.MountPoint(container_path=WORKSPACE, source_volume=VOLUME_NAME, read_only=False)
    init = definition.add_container(
        "WorkspaceInit",
        container_name=INIT_CONTAINER,
        image=image,
        essential=False,
        user="0",
        entry_point=["chown"],
        command=[f"{SANDBOX_UID}:{SANDBOX_UID}", WORKSPACE],
        readonly_root_filesystem=True,
        logging=_log_driver(log_group, INIT_CONTAINER),
    )
    init.add_mount_points(mount)
    linux = ecs.LinuxParameters(scope, "SandboxdLinux", init_process_enabled=False)
    linux.drop_capabilities(*DROPPED_CAPABILITIES)  # tini is PID 1 already
    sandboxd = definition.add_container(
        "Sandboxd",
        container_name=CONTAINER_NAME,
        image=image,
        essential=True,
        port_mappings=[ecs.PortMapping(container_port=SANDBOX_PORT, protocol=ecs.Protocol.TCP)],
        linux_parameters=linux,
        logging=_log_driver(log_group, CONTAINER_NAME),
        environment=proxy_environment(config),
    )
    sandboxd.add_mount_points(mount)
    if config.sandbox_egress == "proxy":
        acknowledge(
            definition,
            "ECS2",
            "The proxy's address (HTTP(S)_PROXY, NO_PROXY) is the only environment: public "
            "configuration, never a secret (the stage config refuses credentials in it)",
        )
    sandboxd.add_container_dependencies(
        ecs.ContainerDependency(container=init, condition=ecs.ContainerDependencyCondition.SUCCESS)
    )
    acknowledge(
        roles.execution,
        "IAM5",
        "ecr:GetAuthorizationToken supports no resource-level permissions (CDK grants the "
        "image pull on the asset repository itself)",
        "Resource::*",
    )
    return definition


def proxy_environment(config: StageConfig) -> dict[str, str] | None:
    """``proxy``: git, pip, npm and curl read these (sandboxd passes them to its children).
    Never anything secret: the config refuses credentials in the proxy URL."""
    if config.sandbox_egress != "proxy" or not config.sandbox_egress_proxy:
        return None
    proxy = config.sandbox_egress_proxy.rstrip("/")
    return {
        **dict.fromkeys(PROXY_VARIABLES, proxy),
        "NO_PROXY": NO_PROXY,
        "no_proxy": NO_PROXY,
    }


def _log_driver(log_group: logs.ILogGroup, prefix: str) -> ecs.LogDriver:
    # non-blocking: a slow CloudWatch must never stall the sandbox's stdout/stderr
    return ecs.LogDrivers.aws_logs(
        stream_prefix=prefix,
        log_group=log_group,
        mode=ecs.AwsLogDriverMode.NON_BLOCKING,
        max_buffer_size=Size.mebibytes(25),
    )
