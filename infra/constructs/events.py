"""Events: the domain event bus, the scheduled entry points of ``catalog.SCHEDULES`` (a rule on
the default bus invokes the function with ``{"step": <step>}``), and the event rules of
``catalog.RULES`` (a rule on the domain bus with the catalog's pattern invokes the function
asynchronously with the event). A new catalog rule needs no change here.

Rule targets: EventBridge retries a failed *delivery* (throttling, the function unavailable) for
up to ``RULE_MAX_EVENT_AGE`` / ``RULE_RETRY_ATTEMPTS`` times and then puts the event on the
``RuleDeadLetters`` queue (SQS-managed encryption, TLS only, kept 14 days). A delivered event that
*fails in the function* is retried by Lambda (the function's asynchronous retries); the app
records that failure on the session (``docs/archive.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from openagents.settings import Settings
from openagents.workflows import catalog

from infra.config import StageConfig
from infra.constructs.function import ServiceFunction
from infra.nag import acknowledge

# EventBridge rules fire at most once a minute; the app's sweep period (settings) is 60 s too
SWEEP = Duration.seconds(max(60, Settings.model_fields["sweep_seconds"].default))
RULE_RETRY_ATTEMPTS = 8
RULE_MAX_EVENT_AGE = Duration.hours(2)
# EventBridge pattern fields (catalog spelling) -> aws_events.EventPattern keyword
PATTERN_FIELDS = {
    "source": "source",
    "detail-type": "detail_type",
    "detail": "detail",
    "account": "account",
    "region": "region",
    "resources": "resources",
    "id": "id",
    "time": "time",
    "version": "version",
}


def _id(name: str, suffix: str) -> str:
    return "".join(part.capitalize() for part in name.split("-")) + suffix


def event_pattern(name: str, pattern: dict[str, Any]) -> events.EventPattern:
    unknown = set(pattern) - set(PATTERN_FIELDS)
    if unknown:
        raise ValueError(f"rule {name!r}: pattern fields {sorted(unknown)} are not supported")
    return events.EventPattern(**{PATTERN_FIELDS[key]: value for key, value in pattern.items()})


class Events(Construct):
    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.bus = events.EventBus(
            self, "Bus", description=f"Open Agents domain events ({config.stage})"
        )
        self.schedules: dict[str, events.Rule] = {}
        self.rules: dict[str, events.Rule] = {}
        self.dead_letters: sqs.Queue | None = None

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
                _id(name, "Schedule"),
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

    def add_rules(self, functions: Mapping[str, ServiceFunction]) -> None:
        """One rule on the domain bus per ``catalog.RULES`` entry, targeting its function."""
        if not catalog.RULES:
            return
        self.dead_letters = self._dead_letter_queue()
        for name, rule_spec in sorted(catalog.RULES.items()):
            function = functions.get(rule_spec["function"])
            if function is None:
                raise ValueError(
                    f"rule {name!r} invokes {rule_spec['function']!r}, which the app does not "
                    "build (infra/constructs/workflows.py)"
                )
            rule = events.Rule(
                self,
                _id(name, "Rule"),
                description=f"Open Agents {name}: {rule_spec['function']}",
                event_bus=self.bus,
                event_pattern=event_pattern(name, rule_spec["pattern"]),
            )
            rule.add_target(
                targets.LambdaFunction(
                    function.function,
                    retry_attempts=RULE_RETRY_ATTEMPTS,
                    max_event_age=RULE_MAX_EVENT_AGE,
                    dead_letter_queue=self.dead_letters,
                )
            )
            self.rules[name] = rule

    def _dead_letter_queue(self) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            "RuleDeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            queue,
            "SQS3",
            "This queue is itself the dead-letter queue of the event rules' targets",
        )
        return queue
