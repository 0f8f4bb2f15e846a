"""Events: the domain event bus, and the scheduled entry points of ``catalog.SCHEDULES`` (a
rule on the default bus invokes the function with ``{"step": <step>}``). Event rules
(``catalog.RULES``), the archive and the ECS task state-change rule arrive with the functions
that consume them."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct
from openagents.settings import Settings
from openagents.workflows import catalog

from infra.config import StageConfig
from infra.constructs.function import ServiceFunction

# EventBridge rules fire at most once a minute; the app's sweep period (settings) is 60 s too
SWEEP = Duration.seconds(max(60, Settings.model_fields["sweep_seconds"].default))


class Events(Construct):
    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.bus = events.EventBus(
            self, "Bus", description=f"Open Agents domain events ({config.stage})"
        )
        self.schedules: dict[str, events.Rule] = {}

    def add_schedules(self, functions: Mapping[str, ServiceFunction]) -> None:
        """One rule per ``catalog.SCHEDULES`` entry; its function must have been built."""
        for name, schedule in sorted(catalog.SCHEDULES.items()):
            function = functions.get(schedule["function"])
            if function is None:
                raise ValueError(
                    f"schedule {name!r} invokes {schedule['function']!r}, which the app does "
                    "not build (infra/constructs/workflows.py builds the ASL files' functions)"
                )
            rule = events.Rule(
                self,
                "".join(part.capitalize() for part in name.split("-")) + "Schedule",
                description=f"Open Agents {name}: {schedule['function']} step {schedule['step']}",
                schedule=events.Schedule.rate(SWEEP),
            )
            rule.add_target(
                targets.LambdaFunction(
                    function.function,
                    event=events.RuleTargetInput.from_object({"step": schedule["step"]}),
                    retry_attempts=0,  # the next sweep is a minute away
                )
            )
            self.schedules[name] = rule
