"""Lambda defaults, defined once: arm64, Python 3.12, JSON logs, X-Ray, an explicit log group
with retention, no retries (event-rule targets may ask for asynchronous ones), and a role of its
own with only what the function declares. A function may join the control-plane network (the
VPC's private subnets, the control-plane security group): its role then gets the ENI actions
Lambda needs, and nothing else."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Size
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig
from infra.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
# What Lambda itself does with the execution role to attach a function to a VPC (the actions of
# AWSLambdaVPCAccessExecutionRole without its logs:*). DescribeNetworkInterfaces has no
# resource-level permissions; Lambda validates the others on "*" when the function is created.
VPC_ENI_ACTIONS = (
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:UnassignPrivateIpAddresses",
)


@dataclass(frozen=True)
class ControlPlaneNetwork:
    """Where the control-plane functions run: private subnets, one security group that the
    sandboxes admit on sandboxd's port."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup


def retention(config: StageConfig) -> logs.RetentionDays:
    return logs.RetentionDays.ONE_YEAR if config.prod else logs.RetentionDays.ONE_MONTH


def removal(config: StageConfig) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY


class Layers(Construct):
    """The two layers every function shares: ``core`` (openagents) and ``deps`` (third party)."""

    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.core = self._layer("Core", config.core_layer, "openagents core package")
        self.deps = self._layer("Deps", config.deps_layer, "third-party runtime dependencies")

    def _layer(self, id: str, path: Path, description: str) -> lambda_.LayerVersion:
        if not (path / "python").is_dir():
            raise FileNotFoundError(f"{path}/python is missing: run `make build` first")
        return lambda_.LayerVersion(
            self,
            id,
            code=lambda_.Code.from_asset(str(path)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=description,
        )

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        return [self.core, self.deps]


class ServiceFunction(Construct):
    """One Lambda function with the project's defaults. ``name`` is the ``functions/`` folder;
    ``handler`` defaults to ``functions.<name>.handler.lambda_handler``."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        name: str,
        layers: Layers,
        environment: Mapping[str, str],
        statements: Sequence[iam.PolicyStatement] = (),
        memory_mb: int = 512,
        ephemeral_storage_mb: int = 512,
        timeout: Duration = Duration.seconds(30),
        description: str = "",
        handler: str | None = None,
        network: ControlPlaneNetwork | None = None,
        star_reason: str = "",
        retry_attempts: int = 0,
    ) -> None:
        super().__init__(scope, id)
        asset = config.function_asset(name)
        self.handler = handler or f"functions.{name}.handler.lambda_handler"
        module = self.handler.rpartition(".")[0]
        if not module.startswith(f"functions.{name}."):
            raise ValueError(f"handler {self.handler} is not in functions/{name}")
        if not (asset / (module.replace(".", "/") + ".py")).is_file():
            raise FileNotFoundError(f"{asset} has no {module}: run `make build` first")
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config), removal_policy=removal(config)
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{name} function: only the actions it uses",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        if network is not None:
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="LambdaVpcEni", actions=list(VPC_ENI_ACTIONS), resources=["*"]
                )
            )
        for statement in statements:
            self.role.add_to_policy(statement)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(asset)),
            handler=self.handler,
            layers=layers.all,
            role=self.role,
            memory_size=memory_mb,
            ephemeral_storage_size=(
                Size.mebibytes(ephemeral_storage_mb) if ephemeral_storage_mb != 512 else None
            ),  # Lambda's default 512 MiB stays out of the template
            timeout=timeout,
            environment=dict(environment),
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            retry_attempts=retry_attempts,  # asynchronous invocations only (event rules)
            max_event_age=Duration.hours(6) if retry_attempts else None,
            description=description or f"Open Agents {name}",
            vpc=network.vpc if network else None,
            vpc_subnets=network.subnets if network else None,
            security_groups=[network.security_group] if network else None,
        )
        star = "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions"
        if network is not None:
            star += (
                "; nor does ec2:DescribeNetworkInterfaces, and Lambda checks the other ENI "
                "actions it needs to attach the function to the VPC on '*'"
            )
        if star_reason:
            star += f"; {star_reason}"
        acknowledge(self.role, "IAM5", star, "Resource::*")
        acknowledge(
            self.function,
            "L1",
            "Pinned to Python 3.12: the deps layer is built for cp312/arm64 "
            "(infra/build.py) and the bytecode is compiled by 3.12",
        )
