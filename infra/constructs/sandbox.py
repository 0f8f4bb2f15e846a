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

The driver's contract (container name, port, volume name, tags) is read from
``openagents.sandbox.fargate_storage`` (``FargateConfig``) so the two cannot drift.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import jsii
from aws_cdk import Aws, IStableListProducer, Lazy, Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from openagents.sandbox import fargate_efs, fargate_storage

from infra import nag
from infra.config import MAX_AZS, PUBLIC_SUBNET_MASK, ROOT, VPC_CIDR, StageConfig
from infra.constructs.data import SNAPSHOTS_PREFIX
from infra.constructs.function import ControlPlaneNetwork, removal, retention
from infra.nag import acknowledge

# ECR serves image layers from this bucket: all the sandbox subnets' S3 endpoint admits
# (https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html)
ECR_LAYER_BUCKET = "prod-{region}-starport-layer-bucket"
SANDBOX_SUBNETS = "Sandbox"  # the isolated subnet group of egress none/proxy
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY = "localhost,127.0.0.1,::1,169.254.170.2"  # loopback, the ECS task metadata endpoint
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(fargate_storage.FargateConfig)}
CONTAINER_NAME = str(_DEFAULTS["container_name"])  # "sandboxd"
SANDBOX_PORT = int(str(_DEFAULTS["sandbox_port"]))  # 8080
VOLUME_NAME = str(_DEFAULTS["volume_name"])  # "workspace"
WORKSPACE = "/workspace"  # sandbox/Dockerfile
INIT_CONTAINER = "workspace-init"
SANDBOX_UID = fargate_efs.SANDBOX_UID  # the image's non-root user
TAG_SESSION = fargate_storage.TAG_SESSION
IMAGE_DIR = ROOT / "sandbox"
NFS_PORT = 2049
ECS_TASKS = "ecs-tasks.amazonaws.com"
ECS = "ecs.amazonaws.com"
VOLUMES_POLICY = "service-role/AmazonECSInfrastructureRolePolicyForVolumes"
# The linux capabilities sandboxd's container keeps: none (it runs as uid 1000 and needs none)
DROPPED_CAPABILITIES = (ecs.Capability.ALL,)
DRIVER_METHODS = ("start", "probe", "client", "stop", "snapshot", "restore", "delete_snapshot")


def _statement(
    sid: str, actions: list[str], resources: list[str], **conditions: Any
) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid, actions=actions, resources=resources, conditions=conditions or None
    )


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
        self.vpc = self._build_vpc(config, access_logs)
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        # where the sandbox tasks run: the control plane's subnets, or their own isolated ones
        self.sandbox_subnets = (
            ec2.SubnetSelection(subnet_group_name=SANDBOX_SUBNETS)
            if config.sandbox_isolated
            else self.subnets
        )
        self.control_plane_sg, self.sandbox_sg = self._build_security_groups()
        self.endpoint_sg: ec2.SecurityGroup | None = None
        if config.sandbox_isolated:
            self.endpoint_sg = self._build_sandbox_endpoints()
        self.network = ControlPlaneNetwork(self.vpc, self.subnets, self.control_plane_sg)
        self._readers: list[iam.IRole] = []
        self.token_secret = self._build_token_secret()
        self.cluster = self._build_cluster(config)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config), removal_policy=removal(config)
        )
        self.task_role, self.execution_role, self.infrastructure_role = self._build_roles()
        self.file_system: efs.FileSystem | None = None
        if config.sandbox_storage == "efs":
            self.file_system = self._build_file_system(config)
        if config.sandbox_isolated:
            self._restrict_sandbox_egress(config)
        self.task_definition = self._build_task_definition(config)

    # ------------------------------------------------------------------ network

    def _build_vpc(self, config: StageConfig, access_logs: s3.IBucket) -> ec2.Vpc:
        subnets = [
            ec2.SubnetConfiguration(
                name="Public",
                subnet_type=ec2.SubnetType.PUBLIC,
                cidr_mask=PUBLIC_SUBNET_MASK,
                map_public_ip_on_launch=False,  # only the NAT gateways live here
            ),
            # one IP per sandbox task and per Lambda ENI: /20 is 4091 addresses per AZ; with
            # egress open the sandboxes run here, sized by sandboxSubnetMask (checked at synth
            # against maxSessions: config._check_addresses)
            ec2.SubnetConfiguration(
                name="Private",
                subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                cidr_mask=config.private_subnet_mask,
            ),
        ]
        gateways: dict[str, Any] = {}
        if config.sandbox_isolated:
            # appended last, so the other subnets keep their CIDRs when a stage switches mode
            subnets.append(
                ec2.SubnetConfiguration(
                    name=SANDBOX_SUBNETS,
                    subnet_type=ec2.SubnetType.PRIVATE_ISOLATED,
                    cidr_mask=config.sandbox_subnet_mask,
                )
            )
            # the sandbox subnets get neither the table's endpoint nor the open S3 one
            gateways["subnets"] = [
                ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
                ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            ]
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(VPC_CIDR),
            max_azs=MAX_AZS,
            nat_gateways=config.nat_gateway_count,
            subnet_configuration=subnets,
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(
                    service=ec2.GatewayVpcEndpointAwsService.S3, **gateways
                ),
                "DynamoDB": ec2.GatewayVpcEndpointOptions(
                    service=ec2.GatewayVpcEndpointAwsService.DYNAMODB, **gateways
                ),
            },
            flow_logs={
                "All": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_s3(access_logs, "vpc-flow-logs/"),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
            # Nothing is ever placed in the default security group (every ENI here gets an
            # explicit one); stripping its rules would need a custom-resource Lambda.
            restrict_default_security_group=False,
        )
        return vpc

    def _build_security_groups(self) -> tuple[ec2.SecurityGroup, ec2.SecurityGroup]:
        control = ec2.SecurityGroup(
            self,
            "ControlPlaneSecurityGroup",
            vpc=self.vpc,
            description="Open Agents control-plane Lambdas: AWS APIs over HTTPS, sandboxd",
            allow_all_outbound=False,
        )
        control.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "AWS APIs (NAT gateway, S3 and DynamoDB gateway endpoints)",
        )
        sandbox = ec2.SecurityGroup(
            self,
            "SandboxSecurityGroup",
            vpc=self.vpc,
            description="Open Agents sandboxes: sandboxd reachable from the control plane only",
            # open: git, package registries (the agent's work needs them); none/proxy: only the
            # rules of _restrict_sandbox_egress
            allow_all_outbound=not self.config.sandbox_isolated,
        )
        sandbox.add_ingress_rule(
            control, ec2.Port.tcp(SANDBOX_PORT), "sandboxd from the control-plane Lambdas"
        )
        control.add_egress_rule(sandbox, ec2.Port.tcp(SANDBOX_PORT), "sandboxd in the sandboxes")
        return control, sandbox

    def _build_sandbox_endpoints(self) -> ec2.SecurityGroup:
        """What a task's ENI needs with no NAT route: the image (ECR api and dkr, layers from
        S3) and the awslogs driver (CloudWatch Logs). Nothing else an agent could use."""
        group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="Open Agents sandbox VPC endpoints (ECR, CloudWatch Logs): HTTPS in",
            allow_all_outbound=False,
        )
        # private DNS makes these names resolve to the endpoints for the whole VPC
        for peer, what in ((self.sandbox_sg, "sandbox tasks"), (self.control_plane_sg, "Lambdas")):
            group.add_ingress_rule(peer, ec2.Port.tcp(443), f"HTTPS from the {what}")
        services = {
            "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
            "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
            "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
        }
        for name, service in services.items():
            endpoint = self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=self.sandbox_subnets,
                security_groups=[group],
                open=False,  # no ingress from the whole VPC CIDR: the rules above only
                private_dns_enabled=True,
            )
            # Code in a sandbox has no credentials of this account, but it could bring its
            # own: without this, PutLogEvents or an image push to another account's log group
            # or registry would carry data out through the endpoint.
            endpoint.add_to_policy(
                iam.PolicyStatement(
                    sid="ThisAccountOnly",
                    principals=[iam.AnyPrincipal()],
                    actions=["*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:PrincipalAccount": Aws.ACCOUNT_ID}},
                )
            )
        layers = self.vpc.add_gateway_endpoint(
            "SandboxS3",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[self.sandbox_subnets],
        )
        layers.add_to_policy(
            iam.PolicyStatement(
                sid="EcrImageLayersOnly",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[
                    f"arn:{Aws.PARTITION}:s3:::{ECR_LAYER_BUCKET.format(region=Aws.REGION)}/*"
                ],
            )
        )
        return group

    def _restrict_sandbox_egress(self, config: StageConfig) -> None:
        sandbox = self.sandbox_sg
        # the sandbox subnets route nowhere but the VPC and S3 (for ECR's layer bucket only)
        sandbox.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "ECR and CloudWatch Logs endpoints, ECR layers in S3: no other route exists",
        )
        if self.file_system is not None:
            (efs_group,) = self.file_system.connections.security_groups
            sandbox.add_egress_rule(efs_group, ec2.Port.tcp(NFS_PORT), "the EFS mount targets")
        if config.sandbox_egress == "proxy":
            assert config.proxy_port is not None
            cidr = config.proxy_cidr or self.vpc.vpc_cidr_block
            sandbox.add_egress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(config.proxy_port), "the egress proxy"
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

    # ------------------------------------------------------------------ cluster and roles

    def _build_cluster(self, config: StageConfig) -> ecs.Cluster:
        insights = (
            ecs.ContainerInsights.ENABLED if config.insights else ecs.ContainerInsights.DISABLED
        )
        cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc, container_insights_v2=insights)
        if not config.insights:
            acknowledge(
                cluster,
                "ECS4",
                "Container Insights is a stage toggle (context containerInsights, on in prod): "
                "it bills custom metrics per task, and sandbox tasks are short-lived",
            )
        return cluster

    def _build_roles(self) -> tuple[iam.Role | None, iam.Role, iam.Role]:
        # EBS: no task role at all, so the task has no credentials endpoint. EFS: IAM-authorized
        # mounts need one (its only permission: mounting the session access points).
        task = (
            iam.Role(
                self,
                "TaskRole",
                assumed_by=iam.ServicePrincipal(ECS_TASKS),
                description="Sandbox tasks: mount EFS access points, nothing else (agent code)",
            )
            if self.config.sandbox_storage == "efs"
            else None
        )
        execution = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal(ECS_TASKS),
            description="ECS agent for sandbox tasks: pull the image, write the log group",
        )
        infrastructure = iam.Role(
            self,
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
        return task, execution, infrastructure

    # ------------------------------------------------------------------ EFS (toggle)

    def _build_file_system(self, config: StageConfig) -> efs.FileSystem:
        security_group = ec2.SecurityGroup(
            self,
            "EfsSecurityGroup",
            vpc=self.vpc,
            description="Open Agents sandbox workspaces on EFS: NFS from the sandboxes only",
            allow_all_outbound=False,
        )
        security_group.add_ingress_rule(
            self.sandbox_sg, ec2.Port.tcp(NFS_PORT), "NFS from the sandboxes"
        )
        file_system = efs.FileSystem(
            self,
            "Workspaces",
            vpc=self.vpc,
            vpc_subnets=self.subnets,
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
        assert self.task_role is not None
        self.task_role.add_to_policy(
            iam.PolicyStatement(
                sid="MountSessionAccessPoints",
                actions=["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                resources=[file_system.file_system_arn],
                conditions={
                    "StringLike": {"elasticfilesystem:AccessPointArn": self._access_point_arns()},
                    "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"},
                },
            )
        )
        return file_system

    def _access_point_arns(self) -> str:
        return Stack.of(self).format_arn(
            service="elasticfilesystem", resource="access-point", resource_name="*"
        )

    # ------------------------------------------------------------------ task definition

    @property
    def family(self) -> str:
        return f"openagents-{self.config.stage}-sandbox"

    def _build_task_definition(self, config: StageConfig) -> ecs.FargateTaskDefinition:
        definition = ecs.FargateTaskDefinition(
            self,
            "TaskDefinition",
            family=self.family,
            cpu=config.sandbox_cpu,
            memory_limit_mib=config.sandbox_memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            task_role=self.task_role,
            execution_role=self.execution_role,
            volumes=[ecs.Volume(name=VOLUME_NAME, configured_at_launch=True)],
        )
        if self.task_role is None:
            # CDK always makes a task role: drop it, and the task definition's reference to it
            definition.node.try_remove_child("TaskRole")
            cfn = definition.node.default_child
            assert isinstance(cfn, ecs.CfnTaskDefinition)
            cfn.add_property_deletion_override("TaskRoleArn")
        # Staged at synth (no Docker needed), built and pushed by `cdk deploy`
        image = ecs.ContainerImage.from_asset(
            str(IMAGE_DIR), platform=ecr_assets.Platform.LINUX_ARM64
        )
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
            logging=self._log_driver(INIT_CONTAINER),
        )
        init.add_mount_points(mount)
        linux = ecs.LinuxParameters(self, "SandboxdLinux", init_process_enabled=False)
        linux.drop_capabilities(*DROPPED_CAPABILITIES)  # tini is PID 1 already
        sandboxd = definition.add_container(
            "Sandboxd",
            container_name=CONTAINER_NAME,
            image=image,
            essential=True,
            port_mappings=[ecs.PortMapping(container_port=SANDBOX_PORT, protocol=ecs.Protocol.TCP)],
            linux_parameters=linux,
            logging=self._log_driver(CONTAINER_NAME),
            environment=self._proxy_environment(config),
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
            ecs.ContainerDependency(
                container=init, condition=ecs.ContainerDependencyCondition.SUCCESS
            )
        )
        acknowledge(
            self.execution_role,
            "IAM5",
            "ecr:GetAuthorizationToken supports no resource-level permissions (CDK grants the "
            "image pull on the asset repository itself)",
            "Resource::*",
        )
        return definition

    @staticmethod
    def _proxy_environment(config: StageConfig) -> dict[str, str] | None:
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

    def _log_driver(self, prefix: str) -> ecs.LogDriver:
        # non-blocking: a slow CloudWatch must never stall the sandbox's stdout/stderr
        return ecs.LogDrivers.aws_logs(
            stream_prefix=prefix,
            log_group=self.log_group,
            mode=ecs.AwsLogDriverMode.NON_BLOCKING,
            max_buffer_size=Size.mebibytes(25),
        )

    # ------------------------------------------------------------------ the driver's view

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
            env["OPENAGENTS_FARGATE_EBS_ROLE_ARN"] = self.infrastructure_role.role_arn
        return env

    @property
    def sandbox_subnet_ids(self) -> list[str]:
        if self.config.sandbox_isolated:
            return self.vpc.select_subnets(subnet_group_name=SANDBOX_SUBNETS).subnet_ids
        return self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids

    def _arn(self, service: str, resource: str, name: str, account: bool = True) -> str:
        return Stack.of(self).format_arn(
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
        :meth:`grant_token_read`). tests/infra/test_least_privilege.py runs each method against
        pinned ECS responses and moto, and checks every request against these statements.
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
                    [role.role_arn for role in (self.task_role, self.execution_role) if role],
                    StringEquals={"iam:PassedToService": ECS_TASKS},
                ),
            ]
            if self.file_system is None:
                statements.append(
                    _statement(
                        "PassVolumeInfrastructureRole",
                        ["iam:PassRole"],
                        [self.infrastructure_role.role_arn],
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
                resources=[self._access_point_arns()],
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
            acknowledge(role, "IAM5", reason, nag.resource(self, arn))

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
                self._access_point_arns(),
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
