"""Previews: ``https://<port>-<session>.<previewDomain>`` (on when ``previewDomain`` is set).

- **Name and certificate.** A wildcard ACM certificate for ``*.<previewDomain>``, validated
  through DNS in the stage's hosted zone, and a wildcard alias record to the load balancer.
- **Load balancer.** An internet-facing ALB in the public subnets: HTTPS (TLS 1.3 policy) only,
  port 80 redirects; an idle timeout long enough for a dev server's hot-reload WebSocket;
  access logs to the access-log bucket.
- **Gateway.** An ECS Fargate service (arm64, 0.25 vCPU, 0.5 GiB, 1 to ``previewMaxTasks``
  tasks scaled on CPU) in the private subnets, running the API's own preview proxy
  (``functions/api/preview_gateway.py``, image ``infra/previews/Dockerfile``). It checks the
  preview cookie before anything reaches a sandbox, then reaches the sandbox's task on its
  private IP through sandboxd's tunnel (sandboxd's port, authenticated with the sandbox's
  token): loopback-bound dev servers work, and no dev-server port is open to the VPC.
- **Network.** Its security group admits the ALB only, on the gateway's port; it sends HTTPS
  (AWS APIs) and sandboxd's port to the sandbox group, which admits it on that port only.
- **Role.** The task role reads the session item and records a preview's activity on it
  (``GetItem``, ``UpdateItem`` on the table), describes sandbox tasks (``DescribeTasks``,
  sandbox cluster only) and reads the sandbox token key: nothing else.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import ROOT, StageConfig
from infra.constructs.control_plane import ControlPlane, Needs
from infra.constructs.function import removal, retention
from infra.constructs.sandbox import ECS_TASKS, SANDBOX_PORT
from infra.nag import acknowledge

GATEWAY_PORT = 8000  # OPENAGENTS_PORT of the gateway's container
HEALTH_PATH = "/__preview/healthz"  # functions/api/preview_gateway.HEALTH_PATH
IDLE_TIMEOUT = Duration.seconds(3600)  # a hot-reload WebSocket stays open while the page is
CPU, MEMORY_MIB = 256, 512
# what the gateway's code calls: the session (GetItem) and its activity (the store's
# transition: a conditional update in a transaction); ECS DescribeTasks; the token key
NEEDS = Needs(
    table=("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"),
    driver=("probe",),
    token_key=True,
)
# the image's build context is the repository, less everything the gateway does not run
IMAGE_FILES = [
    "*",
    "!layers",
    "!layers/core",
    "!layers/core/openagents",
    "!functions",
    "!functions/__init__.py",
    "!functions/api",
    "!infra",
    "!infra/previews",
    "layers/core/openagents/local",
    "**/__pycache__",
    "**/*.pyc",
]


class Previews(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        control_plane: ControlPlane,
        access_logs: s3.IBucket,
        app_url: str,
    ) -> None:
        super().__init__(scope, id)
        assert config.preview_domain
        assert config.preview_hosted_zone_id
        assert config.preview_zone_name
        self.domain = config.preview_domain
        sandbox = control_plane.sandbox
        vpc = sandbox.vpc
        self.zone = route53.PublicHostedZone.from_hosted_zone_attributes(
            self,
            "Zone",
            hosted_zone_id=config.preview_hosted_zone_id,
            zone_name=config.preview_zone_name,
        )
        self.certificate = acm.Certificate(
            self,
            "Certificate",
            domain_name=f"*.{self.domain}",
            validation=acm.CertificateValidation.from_dns(self.zone),
        )
        self.alb_sg = ec2.SecurityGroup(
            self,
            "LoadBalancerSecurityGroup",
            vpc=vpc,
            description="Open Agents preview ALB: HTTPS (and the redirect of HTTP) from anyone",
            allow_all_outbound=False,
        )
        self.alb_sg.add_ingress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "previews (HTTPS)")
        self.alb_sg.add_ingress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "redirect to HTTPS")
        acknowledge(
            self.alb_sg,
            "EC23",
            "The preview ALB is public on purpose: every request needs the preview's signed "
            "cookie (checked by the gateway before any sandbox is reached)",
        )
        self.gateway_sg = ec2.SecurityGroup(
            self,
            "GatewaySecurityGroup",
            vpc=vpc,
            description="Open Agents preview gateway: the ALB in; AWS APIs and sandboxd out",
            allow_all_outbound=False,
        )
        self.gateway_sg.add_ingress_rule(self.alb_sg, ec2.Port.tcp(GATEWAY_PORT), "the preview ALB")
        self.alb_sg.add_egress_rule(
            self.gateway_sg, ec2.Port.tcp(GATEWAY_PORT), "the preview gateway"
        )
        self.gateway_sg.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "AWS APIs (DynamoDB, ECS, Secrets Manager)"
        )
        self.gateway_sg.add_egress_rule(
            sandbox.sandbox_sg, ec2.Port.tcp(SANDBOX_PORT), "sandboxd's tunnel in the sandboxes"
        )
        sandbox.sandbox_sg.add_ingress_rule(
            self.gateway_sg,
            ec2.Port.tcp(SANDBOX_PORT),
            "previews: sandboxd's tunnel from the preview gateway",
        )
        self.load_balancer = self._load_balancer(config, vpc, access_logs)
        self.task_role = self._task_role(control_plane)
        self.service = self._service(config, control_plane, app_url)
        self._listeners()
        self.record = route53.ARecord(
            self,
            "Wildcard",
            zone=self.zone,
            record_name=f"*.{self.domain}.",
            target=route53.RecordTarget.from_alias(targets.LoadBalancerTarget(self.load_balancer)),
        )

    @property
    def url(self) -> str:
        return f"https://<port>-<session>.{self.domain}"

    def _load_balancer(
        self, config: StageConfig, vpc: ec2.IVpc, access_logs: s3.IBucket
    ) -> elbv2.ApplicationLoadBalancer:
        alb = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            internet_facing=True,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
            security_group=self.alb_sg,
            idle_timeout=IDLE_TIMEOUT,
            drop_invalid_header_fields=True,
            deletion_protection=config.prod,
        )
        alb.log_access_logs(access_logs, "preview-alb")
        return alb

    def _task_role(self, control_plane: ControlPlane) -> iam.Role:
        role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal(ECS_TASKS),
            description="Preview gateway: read a session, record its activity, find its task",
        )
        for statement in control_plane.statements(NEEDS):
            role.add_to_policy(statement)
        control_plane.sandbox.grant_token_read(role)
        control_plane.sandbox.acknowledge_driver_statements(role, NEEDS.driver)
        return role

    def _service(
        self, config: StageConfig, control_plane: ControlPlane, app_url: str
    ) -> ecs.FargateService:
        sandbox = control_plane.sandbox
        definition = ecs.FargateTaskDefinition(
            self,
            "TaskDefinition",
            family=f"openagents-{config.stage}-preview-gateway",
            cpu=CPU,
            memory_limit_mib=MEMORY_MIB,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            task_role=self.task_role,
        )
        log_group = logs.LogGroup(
            self, "Logs", retention=retention(config), removal_policy=removal(config)
        )
        environment = {
            **control_plane.environment("preview-gateway", NEEDS),
            "OPENAGENTS_PREVIEW_DOMAIN": self.domain,
            "OPENAGENTS_PREVIEW_APP_URL": app_url,
            "OPENAGENTS_PORT": str(GATEWAY_PORT),
        }
        linux = ecs.LinuxParameters(self, "GatewayLinux", init_process_enabled=True)
        linux.drop_capabilities(ecs.Capability.ALL)
        definition.add_container(
            "Gateway",
            container_name="gateway",
            image=ecs.ContainerImage.from_asset(
                str(ROOT),
                file="infra/previews/Dockerfile",
                exclude=IMAGE_FILES,
                platform=ecr_assets.Platform.LINUX_ARM64,
            ),
            essential=True,
            port_mappings=[ecs.PortMapping(container_port=GATEWAY_PORT)],
            environment=environment,
            readonly_root_filesystem=True,
            linux_parameters=linux,
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix="gateway",
                log_group=log_group,
                mode=ecs.AwsLogDriverMode.NON_BLOCKING,
            ),
        )
        acknowledge(
            definition,
            "ECS2",
            "The environment holds settings only (table, cluster and secret names, the preview "
            "domain); the one secret it uses, the token key, is read from Secrets Manager",
        )
        assert definition.execution_role is not None
        acknowledge(
            definition.execution_role,
            "IAM5",
            "ecr:GetAuthorizationToken supports no resource-level permissions (CDK grants the "
            "image pull on the asset repository itself)",
            "Resource::*",
        )
        service = ecs.FargateService(
            self,
            "Service",
            cluster=sandbox.cluster,
            task_definition=definition,
            desired_count=1,
            min_healthy_percent=100,
            max_healthy_percent=200,
            security_groups=[self.gateway_sg],
            vpc_subnets=sandbox.subnets,
            assign_public_ip=False,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
        )
        scaling = service.auto_scale_task_count(
            min_capacity=1, max_capacity=config.preview_max_tasks
        )
        scaling.scale_on_cpu_utilization(
            "Cpu",
            target_utilization_percent=60,
            scale_in_cooldown=Duration.seconds(300),
            scale_out_cooldown=Duration.seconds(60),
        )
        return service

    def _listeners(self) -> None:
        https = self.load_balancer.add_listener(
            "Https",
            port=443,
            protocol=elbv2.ApplicationProtocol.HTTPS,
            certificates=[elbv2.ListenerCertificate.from_certificate_manager(self.certificate)],
            ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
            open=False,  # the security group's rules above, not CDK's own
        )
        https.add_targets(
            "Gateway",
            port=GATEWAY_PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            targets=[self.service],
            deregistration_delay=Duration.seconds(30),
            health_check=elbv2.HealthCheck(
                path=HEALTH_PATH, healthy_http_codes="200", interval=Duration.seconds(15)
            ),
        )
        self.load_balancer.add_redirect(source_port=80, target_port=443, open=False)
