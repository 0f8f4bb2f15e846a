"""The sandboxes' network: the VPC, the security groups, and (egress ``none``/``proxy``) the
isolated subnets' endpoints and egress rules.

Each function adds to the :class:`~infra.constructs.sandbox.Sandbox` construct it is given
(``scope``), so the logical ids are the ones that construct has always had.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import MAX_AZS, PUBLIC_SUBNET_MASK, VPC_CIDR, StageConfig
from infra.constructs.sandbox_contract import CONTROL_PLANE_SUBNETS, NFS_PORT, SANDBOX_PORT

# ECR serves image layers from this bucket: all the sandbox subnets' S3 endpoint admits
# (https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html)
ECR_LAYER_BUCKET = "prod-{region}-starport-layer-bucket"
SANDBOX_SUBNETS = "Sandbox"  # the isolated subnet group of egress none/proxy


def sandbox_subnets(config: StageConfig) -> ec2.SubnetSelection:
    """Where the sandbox tasks run: the control plane's subnets, or their own isolated ones."""
    if config.sandbox_isolated:
        return ec2.SubnetSelection(subnet_group_name=SANDBOX_SUBNETS)
    return CONTROL_PLANE_SUBNETS


def sandbox_subnet_ids(vpc: ec2.IVpc, config: StageConfig) -> list[str]:
    if config.sandbox_isolated:
        return vpc.select_subnets(subnet_group_name=SANDBOX_SUBNETS).subnet_ids
    return vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids


def build_vpc(scope: Construct, config: StageConfig, access_logs: s3.IBucket) -> ec2.Vpc:
    """The VPC over two AZs: public subnets for the NAT gateway(s) only, private ones for the
    sandboxes and the Lambdas, S3 and DynamoDB gateway endpoints, flow logs to ``access_logs``."""
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
        scope,
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


def build_security_groups(
    scope: Construct, vpc: ec2.IVpc, config: StageConfig
) -> tuple[ec2.SecurityGroup, ec2.SecurityGroup]:
    """``ControlPlane`` and ``Sandbox``: sandboxd's port from the one to the other only."""
    control = ec2.SecurityGroup(
        scope,
        "ControlPlaneSecurityGroup",
        vpc=vpc,
        description="Open Agents control-plane Lambdas: AWS APIs over HTTPS, sandboxd",
        allow_all_outbound=False,
    )
    control.add_egress_rule(
        ec2.Peer.any_ipv4(),
        ec2.Port.tcp(443),
        "AWS APIs (NAT gateway, S3 and DynamoDB gateway endpoints)",
    )
    sandbox = ec2.SecurityGroup(
        scope,
        "SandboxSecurityGroup",
        vpc=vpc,
        description="Open Agents sandboxes: sandboxd reachable from the control plane only",
        # open: git, package registries (the agent's work needs them); none/proxy: only the
        # rules of _restrict_sandbox_egress
        allow_all_outbound=not config.sandbox_isolated,
    )
    sandbox.add_ingress_rule(
        control, ec2.Port.tcp(SANDBOX_PORT), "sandboxd from the control-plane Lambdas"
    )
    control.add_egress_rule(sandbox, ec2.Port.tcp(SANDBOX_PORT), "sandboxd in the sandboxes")
    return control, sandbox


def build_sandbox_endpoints(
    scope: Construct,
    vpc: ec2.Vpc,
    config: StageConfig,
    sandbox_sg: ec2.ISecurityGroup,
    control_plane_sg: ec2.ISecurityGroup,
) -> ec2.SecurityGroup:
    """What a task's ENI needs with no NAT route: the image (ECR api and dkr, layers from
    S3) and the awslogs driver (CloudWatch Logs). Nothing else an agent could use."""
    group = ec2.SecurityGroup(
        scope,
        "EndpointSecurityGroup",
        vpc=vpc,
        description="Open Agents sandbox VPC endpoints (ECR, CloudWatch Logs): HTTPS in",
        allow_all_outbound=False,
    )
    # private DNS makes these names resolve to the endpoints for the whole VPC
    for peer, what in ((sandbox_sg, "sandbox tasks"), (control_plane_sg, "Lambdas")):
        group.add_ingress_rule(peer, ec2.Port.tcp(443), f"HTTPS from the {what}")
    services = {
        "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
        "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
        "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    }
    for name, service in services.items():
        endpoint = vpc.add_interface_endpoint(
            name,
            service=service,
            subnets=sandbox_subnets(config),
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
    layers = vpc.add_gateway_endpoint(
        "SandboxS3",
        service=ec2.GatewayVpcEndpointAwsService.S3,
        subnets=[sandbox_subnets(config)],
    )
    layers.add_to_policy(
        iam.PolicyStatement(
            sid="EcrImageLayersOnly",
            principals=[iam.AnyPrincipal()],
            actions=["s3:GetObject"],
            resources=[f"arn:{Aws.PARTITION}:s3:::{ECR_LAYER_BUCKET.format(region=Aws.REGION)}/*"],
        )
    )
    return group


def restrict_sandbox_egress(
    sandbox: ec2.ISecurityGroup,
    vpc: ec2.IVpc,
    config: StageConfig,
    file_system: efs.FileSystem | None,
) -> None:
    """Egress ``none``/``proxy``: what the sandbox group may still send, and to where."""
    # the sandbox subnets route nowhere but the VPC and S3 (for ECR's layer bucket only)
    sandbox.add_egress_rule(
        ec2.Peer.any_ipv4(),
        ec2.Port.tcp(443),
        "ECR and CloudWatch Logs endpoints, ECR layers in S3: no other route exists",
    )
    if file_system is not None:
        (efs_group,) = file_system.connections.security_groups
        sandbox.add_egress_rule(efs_group, ec2.Port.tcp(NFS_PORT), "the EFS mount targets")
    if config.sandbox_egress == "proxy":
        assert config.proxy_port is not None
        cidr = config.proxy_cidr or vpc.vpc_cidr_block
        sandbox.add_egress_rule(
            ec2.Peer.ipv4(cidr), ec2.Port.tcp(config.proxy_port), "the egress proxy"
        )
