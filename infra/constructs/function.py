"""Lambda defaults, defined once: arm64, Python 3.12, JSON logs, X-Ray, an explicit log group
with retention, no retries, and a role of its own with only what the function declares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig
from infra.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64


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
    """One Lambda function with the project's defaults. ``name`` is the ``functions/`` folder."""

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
        timeout: Duration = Duration.seconds(30),
        description: str = "",
    ) -> None:
        super().__init__(scope, id)
        asset = config.function_asset(name)
        if not (asset / "functions" / name / "handler.py").is_file():
            raise FileNotFoundError(f"{asset} is not staged: run `make build` first")
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
        for statement in statements:
            self.role.add_to_policy(statement)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(asset)),
            handler=f"functions.{name}.handler.lambda_handler",
            layers=layers.all,
            role=self.role,
            memory_size=memory_mb,
            timeout=timeout,
            environment=dict(environment),
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            retry_attempts=0,
            description=description or f"Open Agents {name}",
        )
        acknowledge(
            self.role,
            "IAM5",
            "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions; "
            "CDK adds them for active tracing",
            "Resource::*",
        )
