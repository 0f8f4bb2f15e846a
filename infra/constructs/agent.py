"""Agent: the durable agent-turn function (``functions/agent``), one durable execution per turn
named by the run id, and what the API needs to start and stop those executions.

- **Runtime.** Python 3.13 (Lambda durable functions need it), arm64, its own layers: the core
  layer's asset again (pure Python; ``make build`` adds 3.13 bytecode) and the deps layer built
  for cp313 (``.build/layers/deps-py313``: compiled wheels are per CPython minor version, so the
  other functions' 3.12 layer cannot serve it). ``durableConfig``: the turn's execution timeout
  (``agentTurnTimeoutSeconds``) and 14 days of execution history. Invoked through the ``live``
  alias (durable functions take qualified ARNs only), so an execution keeps the version it
  started on.
- **Network.** The VPC's private subnets, with a security group of its own: egress HTTPS (Bedrock,
  the AWS APIs) and sandboxd's port to the sandboxes, which admit it on that port.
- **Role.** Its log group, X-Ray, the VPC ENIs; the table, message bodies, the GitHub token and
  the workflows the turn's host uses (:data:`NEEDS`); the sandbox token key; the execution's own
  checkpoints (``lambda:CheckpointDurableExecution``, ``lambda:GetDurableExecutionState`` on
  ``function:<name>:*``, https://docs.aws.amazon.com/lambda/latest/dg/durable-security.html);
  ``bedrock:InvokeModelWithResponseStream`` on the configured models only (``agentModels``).
- **The API.** ``lambda:InvokeFunction`` on the alias (the asynchronous start), and
  ``ListDurableExecutionsByFunction`` / ``StopDurableExecution`` (a stop the run does not
  honour, ``openagents.agent.engine_lambda``); ``OPENAGENTS_AGENT_FUNCTION_ARN`` and
  ``OPENAGENTS_MODELS`` in its settings.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, Aws, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import nag
from infra.config import StageConfig
from infra.constructs.control_plane import GITHUB_CREDENTIALS, ControlPlane, Needs
from infra.constructs.data import ATTACHMENTS_PREFIX, DIFFS_PREFIX, MESSAGES_PREFIX
from infra.constructs.function import (
    ARCHITECTURE,
    VPC_ENI_ACTIONS,
    ServiceFunction,
    removal,
    retention,
)
from infra.constructs.sandbox import SANDBOX_PORT
from infra.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_13  # durable functions need Python 3.13
SERVICE = "openagents-agent"  # functions/agent/handler.py's metrics service
HANDLER = "functions.agent.handler.lambda_handler"
ALIAS = "live"
HISTORY_DAYS = 14  # durable execution history kept after a turn ends
INVOCATION_TIMEOUT = Duration.minutes(15)  # one invocation: a model call or a tool call (bash)
MEMORY_MB = 1024
DURABLE_ACTIONS = ("lambda:CheckpointDurableExecution", "lambda:GetDurableExecutionState")
MODEL_ACTION = "bedrock:InvokeModelWithResponseStream"  # converse_stream

# What the turn's code does (tests/infra/test_least_privilege.py runs turns and proves the list
# is exactly what they use): the run store (runs, steps, stream events, the chat's claim; batch
# writes when a run ends), the message store (the assistant message after every step, large
# bodies in S3, an upsert replacing the old object), the host (the session, a hibernated session
# resumed: its workflows), auto-commit / auto-PR after a natural finish (the GitHub token), the
# refreshed diff cache, sandboxd (the token key), and the diff refresh that cannot reach sandboxd
# (the probe, and the stop of the lost task).
NEEDS = Needs(
    table=(
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
    ),
    message_bodies=("s3:DeleteObject", "s3:GetObject", "s3:PutObject"),
    diffs=("s3:PutObject",),
    attachments=("s3:GetObject",),  # a user message's files, read at each model step
    secrets=GITHUB_CREDENTIALS,
    starts=("provisioning", "lifecycle"),
    driver=("probe", "stop"),
    token_key=True,
)


class Agent(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        control_plane: ControlPlane,
    ) -> None:
        super().__init__(scope, id)
        self.config = config
        sandbox = control_plane.sandbox
        stack = Stack.of(self)
        self.function_name = f"openagents-{config.stage}-agent"
        self.function_arn = stack.format_arn(
            service="lambda",
            resource="function",
            resource_name=self.function_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.security_group = self._build_security_group(control_plane)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config), removal_policy=removal(config)
        )
        self.role = self._build_role(control_plane)
        core = lambda_.LayerVersion(
            self,
            "Core",
            code=lambda_.Code.from_asset(str(config.core_layer)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="openagents core package (the agent function's Python 3.13)",
        )
        deps = lambda_.LayerVersion(
            self,
            "Deps",
            code=lambda_.Code.from_asset(str(_layer_dir(config.agent_deps_layer))),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="third-party runtime dependencies for Python 3.13 (cp313/arm64)",
        )
        environment = {
            **control_plane.environment(SERVICE, NEEDS),
            "OPENAGENTS_AGENT_TURN_TIMEOUT_SECONDS": str(config.agent_turn_timeout_seconds),
            **self.model_environment,
        }
        asset = config.function_asset("agent")
        if not (asset / "functions" / "agent" / "handler.py").is_file():
            raise FileNotFoundError(f"{asset} has no functions.agent.handler: run `make build`")
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=self.function_name,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(asset)),
            handler=HANDLER,
            layers=[core, deps],
            role=self.role,
            memory_size=MEMORY_MB,
            timeout=INVOCATION_TIMEOUT,
            environment=environment,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            durable_config=lambda_.DurableConfig(
                execution_timeout=Duration.seconds(config.agent_turn_timeout_seconds),
                retention_period=Duration.days(HISTORY_DAYS),
            ),
            description="Open Agents agent turn (a Lambda durable function)",
            vpc=sandbox.vpc,
            vpc_subnets=sandbox.subnets,
            security_groups=[self.security_group],
        )
        self.alias = lambda_.Alias(
            self, "Live", alias_name=ALIAS, version=self.function.current_version
        )
        self._acknowledge(control_plane)

    # ------------------------------------------------------------------ network

    def _build_security_group(self, control_plane: ControlPlane) -> ec2.SecurityGroup:
        sandbox = control_plane.sandbox
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=sandbox.vpc,
            description="Open Agents agent turns: Bedrock and AWS APIs over HTTPS, sandboxd",
            allow_all_outbound=False,
        )
        group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "Bedrock and AWS APIs (NAT gateway, S3 and DynamoDB gateway endpoints)",
        )
        group.add_egress_rule(
            sandbox.sandbox_sg, ec2.Port.tcp(SANDBOX_PORT), "sandboxd in the sandboxes"
        )
        sandbox.sandbox_sg.add_ingress_rule(
            group, ec2.Port.tcp(SANDBOX_PORT), "sandboxd from the agent turns"
        )
        return group

    # ------------------------------------------------------------------ role

    @property
    def model_arns(self) -> list[str]:
        """The inference profiles and foundation models ``agentModels`` names (direct calls)."""
        arns = []
        for model in self.config.agent_models:
            if StageConfig.inference_profile_model(model) is not None:
                arns.append(self._profile_arn(model))
            else:
                arns.append(self._foundation_model_arn(model, Aws.REGION))
        return arns

    def _profile_arn(self, profile: str) -> str:
        return (
            f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{profile}"
        )

    @staticmethod
    def _foundation_model_arn(model: str, region: str) -> str:
        return f"arn:{Aws.PARTITION}:bedrock:{region}::foundation-model/{model}"

    @property
    def profile_models(self) -> dict[str, str]:
        """Inference profile id -> the foundation model it routes to (in any of its regions)."""
        found = {}
        for model in self.config.agent_models:
            behind = StageConfig.inference_profile_model(model)
            if behind is not None:
                found[model] = behind
        return found

    def _model_statements(self) -> list[iam.PolicyStatement]:
        if not self.config.agent_models:
            return []
        statements = [
            iam.PolicyStatement(
                sid="InvokeModels", actions=[MODEL_ACTION], resources=self.model_arns
            )
        ]
        # a cross-region inference profile invokes its foundation model in one of the profile's
        # destination regions: allowed only through that profile
        for number, (profile, model) in enumerate(sorted(self.profile_models.items())):
            statements.append(
                iam.PolicyStatement(
                    sid=f"InvokeModelsThroughProfile{number or ''}",
                    actions=[MODEL_ACTION],
                    resources=[self._foundation_model_arn(model, "*")],
                    conditions={
                        "StringEquals": {"bedrock:InferenceProfileArn": self._profile_arn(profile)}
                    },
                )
            )
        return statements

    def _build_role(self, control_plane: ControlPlane) -> iam.Role:
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="agent function: only the actions it uses",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="LambdaVpcEni", actions=list(VPC_ENI_ACTIONS), resources=["*"])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DurableCheckpoints",
                actions=list(DURABLE_ACTIONS),
                resources=[f"{self.function_arn}:*"],
            )
        )
        for statement in control_plane.statements(NEEDS) + self._model_statements():
            role.add_to_policy(statement)
        control_plane.sandbox.grant_token_read(role)
        control_plane.sandbox.acknowledge_driver_statements(role, NEEDS.driver)
        return role

    def _acknowledge(self, control_plane: ControlPlane) -> None:
        star = (
            "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions; "
            "nor does ec2:DescribeNetworkInterfaces, and Lambda checks the other ENI actions it "
            "needs to attach the function to the VPC on '*'"
        )
        reason = control_plane.star_reason(NEEDS)
        if reason:
            star += f"; {reason}"
        acknowledge(self.role, "IAM5", star, "Resource::*")
        acknowledge(
            self.role,
            "IAM5",
            "A durable execution's ARN is function:<name>:<version>/durable-execution/<name>/<id>"
            ": checkpoints are granted on this function's versions only (the documented form)",
            nag.resource(self, f"{self.function_arn}:*"),
        )
        acknowledge(
            self.role,
            "IAM5",
            "Large message bodies are objects under messages/<chatId>/<messageId>/...: "
            "the prefix is the narrowest resource",
            nag.resource(self, control_plane.data.artifacts.arn_for_objects(f"{MESSAGES_PREFIX}*")),
        )
        acknowledge(
            self.role,
            "IAM5",
            "The cached diffs are objects diffs/<sessionId>.json: the prefix is the narrowest "
            "resource",
            nag.resource(self, control_plane.data.artifacts.arn_for_objects(f"{DIFFS_PREFIX}*")),
        )
        acknowledge(
            self.role,
            "IAM5",
            "Attachments are objects under attachments/<userId>/<sessionId>/<id>: the prefix is "
            "the narrowest resource",
            nag.resource(
                self, control_plane.data.artifacts.arn_for_objects(f"{ATTACHMENTS_PREFIX}*")
            ),
        )
        acknowledge(
            self.function,
            "L1",
            "Pinned to Python 3.13, the runtime of Lambda durable functions the SDK targets: the "
            "deps-py313 layer is built for cp313/arm64 (infra/build.py)",
        )
        for model in sorted(set(self.profile_models.values())):
            acknowledge(
                self.role,
                "IAM5",
                "A cross-region inference profile runs its foundation model in any of the "
                "profile's regions: allowed only with bedrock:InferenceProfileArn = the profile",
                nag.resource(self, self._foundation_model_arn(model, "*")),
            )

    # ------------------------------------------------------------------ the API's view

    @property
    def model_environment(self) -> dict[str, str]:
        """``OPENAGENTS_MODELS``: the configured models, ``bedrock/<id>``, the first the default."""
        if not self.config.agent_models:
            return {}
        return {"OPENAGENTS_MODELS": ",".join(f"bedrock/{m}" for m in self.config.agent_models)}

    def grant_turns(self, api: ServiceFunction) -> None:
        """Let the API start turns (an asynchronous invoke of the alias) and stop them."""
        api.role.add_to_policy(
            iam.PolicyStatement(
                sid="StartAgentTurns",
                actions=["lambda:InvokeFunction"],
                resources=[self.alias.function_arn],
            )
        )
        api.role.add_to_policy(
            iam.PolicyStatement(
                sid="StopAgentTurns",
                actions=["lambda:ListDurableExecutionsByFunction", "lambda:StopDurableExecution"],
                resources=[f"{self.function_arn}:*"],
            )
        )
        api.function.add_environment("OPENAGENTS_AGENT_FUNCTION_ARN", self.alias.function_arn)
        for key, value in self.model_environment.items():
            api.function.add_environment(key, value)
        acknowledge(
            api.role,
            "IAM5",
            "Stopping a turn lists and stops durable executions, sub-resources of the agent "
            "function's versions (function:<name>:<version>/durable-execution/...)",
            nag.resource(self, f"{self.function_arn}:*"),
        )


def _layer_dir(folder: Path) -> Path:
    if not (folder / "python").is_dir():
        raise FileNotFoundError(f"{folder}/python is missing: run `make build` first")
    return folder
