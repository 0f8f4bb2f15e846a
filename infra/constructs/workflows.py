"""Workflows: the Step Functions state machines and the Lambda functions their tasks call.

Both come from ``openagents.workflows.catalog``, the mapping the one-machine runtime uses too:
``STATE_MACHINES`` names the ASL files in ``infra/statemachines/`` (deployed as they are, via
``DefinitionBody.from_file``), and each ``${<Name>FunctionArn}`` placeholder in a file becomes the
ARN of the function built here for catalog function ``<name>`` (handler string from
``FUNCTIONS``). The targets of ``catalog.SCHEDULES`` and ``catalog.RULES`` (the archiver) are
built here too (``infra/constructs/events.py`` wires their rules). A catalog function the app
builds without a :data:`SPECS` entry fails the synth.

Each state machine is STANDARD (provisioning waits on sandboxes for minutes, the lifecycle loop
for hours; executions are deduplicated by name), is named ``openagents-<stage>-<machine>`` (the
ARN the functions are given is computed from it), logs ALL events to its own log group *without*
execution data (inputs and outputs are session ids, generations, run ids and decisions, and Step
Functions already keeps the full history of a standard execution for 90 days; the log stays free
of whatever a future payload may carry), is traced with X-Ray, and its role may invoke exactly its
functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from openagents.workflows import catalog

from infra.config import ROOT, StageConfig
from infra.constructs.control_plane import (
    GITHUB_CREDENTIALS,
    ControlPlane,
    Needs,
    state_machine_name,
)
from infra.constructs.function import Layers, ServiceFunction, removal, retention
from infra.nag import acknowledge

STATEMACHINES_DIR = ROOT / "infra" / "statemachines"
# Sandbox readiness probes, one per Wait (1 s) + the probe's own time: a cold Fargate task
# (image pull, ENI, EBS attach) takes 30-90 s; 180 probes bound provisioning at about 4 min.
SANDBOX_READY_ATTEMPTS = 180
LIFECYCLE_TIMEOUT = Duration.minutes(15)
# hibernate waits for the EBS snapshot: delay x attempts stays under the lifecycle function's
# timeout with room for the rest of the step (stop the task, write the session)
SNAPSHOT_WAIT_DELAY_SECONDS = 15
SNAPSHOT_WAIT_MARGIN_SECONDS = 120
SNAPSHOT_WAIT_MAX_ATTEMPTS = int(
    (LIFECYCLE_TIMEOUT.to_seconds() - SNAPSHOT_WAIT_MARGIN_SECONDS) // SNAPSHOT_WAIT_DELAY_SECONDS
)


@dataclass(frozen=True)
class FunctionSpec:
    """What one catalog function needs beyond the defaults."""

    service: str
    needs: Needs
    environment: dict[str, str] = field(default_factory=dict)
    memory_mb: int = 512
    ephemeral_storage_mb: int = 512  # /tmp
    timeout: Duration = field(default_factory=lambda: Duration.seconds(30))
    description: str = ""
    async_retries: int = 0  # Lambda's retries of a failed asynchronous (event rule) invocation


SPECS: dict[str, FunctionSpec] = {
    "provisioner": FunctionSpec(
        service="openagents-provisioner",
        needs=Needs(
            table=(
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
            ),
            bundles=("s3:GetObject",),  # an unarchived session's workspace comes from its bundle
            secrets=GITHUB_CREDENTIALS,  # a private repository is cloned here, with its token
            starts=("lifecycle",),  # a session that becomes active starts its loop
            driver=("start", "probe", "stop"),
            token_key=True,
        ),
        environment={"OPENAGENTS_SANDBOX_READY_ATTEMPTS": str(SANDBOX_READY_ATTEMPTS)},
        # the prepare step waits on sandboxd's clone (up to 600 s, the client 660 s)
        timeout=Duration.minutes(12),
        # a private repository is cloned here, not in the sandbox: the fetched pack goes to /tmp
        # (at most OPENAGENTS_GIT_CLONE_MAX_BYTES, 512 MiB), then the bundle is built in memory
        memory_mb=2048,
        ephemeral_storage_mb=1024,
        description="Open Agents provisioning steps (start, probe, prepare, activate, fail)",
    ),
    "lifecycle": FunctionSpec(
        service="openagents-lifecycle",
        needs=Needs(
            table=(
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                # the reconciler finishes deletes: the tombstones' Query, the children's removal
                "dynamodb:Query",
                "dynamodb:DeleteItem",
                "dynamodb:BatchWriteItem",
            ),
            indexes={"overdue": ("dynamodb:Query",)},
            starts=("lifecycle",),
            driver=("probe", "snapshot", "stop", "delete_snapshot"),
            token_key=True,
        ),
        environment={
            "OPENAGENTS_FARGATE_SNAPSHOT_WAIT_DELAY_SECONDS": str(SNAPSHOT_WAIT_DELAY_SECONDS),
            "OPENAGENTS_FARGATE_SNAPSHOT_WAIT_MAX_ATTEMPTS": str(SNAPSHOT_WAIT_MAX_ATTEMPTS),
        },
        timeout=LIFECYCLE_TIMEOUT,
        description="Open Agents lifecycle loop (claim, evaluate, hibernate, recover, reconcile)",
    ),
    "archiver": FunctionSpec(
        service="openagents-archiver",
        needs=Needs(
            table=(
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
            ),
            indexes={"idle": ("dynamodb:Query",)},  # the auto-archive schedule
            bundles=("s3:DeleteObject", "s3:PutObject"),  # a newer bundle replaces the older
            secrets=GITHUB_CREDENTIALS,  # archiving refreshes the PR (auto-archive included)
            # a hibernated session's work is bundled from a temporary sandbox (its snapshot)
            driver=("start", "probe", "stop", "delete_snapshot"),
            token_key=True,  # sandboxd calls (git bundle, reading it back)
        ),
        environment={"OPENAGENTS_SANDBOX_READY_ATTEMPTS": str(SANDBOX_READY_ATTEMPTS)},
        # bundling a large repository: git bundle (up to 600 s) plus reading it back in chunks
        timeout=Duration.minutes(15),
        description="Open Agents archive finalisation and auto-archive",
        async_retries=2,  # the rule's delivery is asynchronous: a failure is retried by Lambda
    ),
}


def catalog_functions(statemachines_dir: Path = STATEMACHINES_DIR) -> list[str]:
    """Every catalog function the app builds: those the ASL files reference, and the targets
    of ``catalog.SCHEDULES`` and ``catalog.RULES``."""
    used = {
        name
        for machine in catalog.STATE_MACHINES
        for name in catalog.functions_used(
            catalog.definition_path(statemachines_dir, machine).read_text()
        )
    }
    used |= {schedule["function"] for schedule in catalog.SCHEDULES.values()}
    used |= {rule["function"] for rule in catalog.RULES.values()}
    return sorted(used)


class Workflows(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        layers: Layers,
        control_plane: ControlPlane,
    ) -> None:
        super().__init__(scope, id)
        self._config, self._layers, self._control_plane = config, layers, control_plane
        self.functions: dict[str, ServiceFunction] = {}
        self.state_machines: dict[str, sfn.StateMachine] = {}
        for machine in sorted(catalog.STATE_MACHINES):
            path = catalog.definition_path(STATEMACHINES_DIR, machine)
            used = sorted(catalog.functions_used(path.read_text()))
            functions = {name: self._function(name) for name in used}
            self.state_machines[machine] = self._state_machine(machine, path, functions)
        for name in catalog_functions():  # the schedules' and the event rules' targets
            self._function(name)

    # ------------------------------------------------------------------ functions

    def _function(self, name: str) -> ServiceFunction:
        if name in self.functions:
            return self.functions[name]
        if name not in catalog.FUNCTIONS:
            raise ValueError(
                f"an ASL file, schedule or rule references {name!r}, which the catalog does not "
                "know"
            )
        if name not in SPECS:
            raise ValueError(
                f"catalog function {name!r} has no FunctionSpec in infra/constructs/workflows.py"
            )
        spec = SPECS[name]
        handler = catalog.FUNCTIONS[name]
        control_plane = self._control_plane
        function = ServiceFunction(
            self,
            f"{name.capitalize()}Function",
            config=self._config,
            name=handler.split(".")[1],  # functions.<folder>.handler.lambda_handler
            handler=handler,
            layers=self._layers,
            environment={
                **control_plane.environment(spec.service, spec.needs),
                **spec.environment,
            },
            statements=control_plane.statements(spec.needs),
            memory_mb=spec.memory_mb,
            ephemeral_storage_mb=spec.ephemeral_storage_mb,
            timeout=spec.timeout,
            description=spec.description,
            retry_attempts=spec.async_retries,
            network=control_plane.sandbox.network,
            star_reason=control_plane.star_reason(spec.needs),
        )
        control_plane.grant(function, spec.needs)
        self.functions[name] = function
        return function

    # ------------------------------------------------------------------ state machines

    def _state_machine(
        self, machine: str, path: Path, functions: dict[str, ServiceFunction]
    ) -> sfn.StateMachine:
        config = self._config
        id = "".join(part.capitalize() for part in machine.split("-")) + "StateMachine"
        name = state_machine_name(config, machine)
        log_group = logs.LogGroup(
            self,
            f"{id}Logs",
            # the vended-logs prefix keeps CloudWatch Logs' resource policy small
            log_group_name=f"/aws/vendedlogs/states/{name}",
            retention=retention(config),
            removal_policy=removal(config),
        )
        state_machine = sfn.StateMachine(
            self,
            id,
            state_machine_name=name,
            definition_body=sfn.DefinitionBody.from_file(str(path)),
            definition_substitutions={
                catalog.placeholder(function): built.function.function_arn
                for function, built in functions.items()
            },
            state_machine_type=sfn.StateMachineType.STANDARD,
            logs=sfn.LogOptions(
                destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False
            ),
            tracing_enabled=True,
            removal_policy=removal(config),
        )
        state_machine.add_to_role_policy(
            iam.PolicyStatement(
                sid="InvokeTaskFunctions",
                actions=["lambda:InvokeFunction"],
                resources=[built.function.function_arn for built in functions.values()],
            )
        )
        acknowledge(
            state_machine.role,
            "IAM5",
            "Step Functions log delivery (logs:*LogDelivery, PutResourcePolicy, Describe*) and "
            "X-Ray tracing actions support no resource-level permissions",
            "Resource::*",
        )
        return state_machine
