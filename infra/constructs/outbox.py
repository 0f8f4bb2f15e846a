"""The events outbox on AWS: the table's stream → an EventBridge pipe → the domain bus.

The store writes each domain event as an outbox item (sort key ``O#<time>#<entry id>``, on the
session's partition) in the same TransactWriteItems as the change it reports
(``openagents.store.dynamodb``). The table streams new images; the pipe keeps only the INSERTs
of outbox items (a filter on ``eventName`` and the sort key's prefix: sessions, messages, TTL
deletions and every other item are dropped before anything is billed or invoked), a small
enrichment function (``functions/outbox``) turns each record into the event's ``detail`` (the
versioned envelope, parsed from the item's JSON), and the pipe puts it on the bus with the
detail-type, source and time read from that detail: the entry ``events/eventbridge.py`` sent.

Delivery: at least once, in order per shard (parallelization 1: a session's items share a
partition, hence a shard). A failing batch is retried (``RETRY_ATTEMPTS``, bisected to isolate a
bad record) for up to ``MAX_RECORD_AGE``, then its stream coordinates go to the ``DeadLetters``
queue; the records stay in the stream for 24 h and the items in the table until their TTL
(2 days), so a dead-lettered batch can be read back and re-published (docs/deploy.md).

The pipe's role may read this table's stream, invoke this enrichment, put events on this bus and
send to this queue; nothing else.
"""

from __future__ import annotations

import json

from aws_cdk import Aws, Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_pipes as pipes
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from openagents.store.keys import OUTBOX_PREFIX

from infra.config import StageConfig
from infra.constructs.function import Layers, ServiceFunction, removal, retention
from infra.nag import acknowledge

SERVICE = "openagents-outbox"  # functions.outbox.handler.SERVICE
BATCH_SIZE = 10  # PutEvents' entries per call: one batch is one call to the bus
RETRY_ATTEMPTS = 10
MAX_RECORD_AGE = Duration.hours(6)  # well inside the stream's 24 h retention
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)
# The pipe's event pattern: new outbox items only (not their TTL deletions, not other items)
FILTER = {"eventName": ["INSERT"], "dynamodb": {"Keys": {"sk": {"S": [{"prefix": OUTBOX_PREFIX}]}}}}


class Outbox(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        table: dynamodb.Table,
        bus: events.IEventBus,
        layers: Layers,
    ) -> None:
        super().__init__(scope, id)
        stream_arn = table.table_stream_arn
        if stream_arn is None:
            raise ValueError("the table has no stream: Data must enable NEW_IMAGE")
        self.enrichment = ServiceFunction(
            self,
            "Enrichment",
            config=config,
            name="outbox",
            layers=layers,
            environment={"POWERTOOLS_SERVICE_NAME": SERVICE},
            memory_mb=256,
            timeout=Duration.seconds(10),
            description="Open Agents outbox: stream records -> event details (pipe enrichment)",
        )
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letters,
            "SQS3",
            "This queue is itself the dead-letter queue of the events outbox pipe",
        )
        self.log_group = logs.LogGroup(
            self, "PipeLogs", retention=retention(config), removal_policy=removal(config)
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "pipes.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            description="events outbox pipe: this table's stream -> this bus, nothing else",
        )
        for statement in (
            iam.PolicyStatement(
                sid="ReadTableStream", actions=list(STREAM_READ_ACTIONS), resources=[stream_arn]
            ),
            iam.PolicyStatement(
                sid="Enrich",
                actions=["lambda:InvokeFunction"],
                resources=[self.enrichment.function.function_arn],
            ),
            iam.PolicyStatement(
                sid="PublishDomainEvents",
                actions=["events:PutEvents"],
                resources=[bus.event_bus_arn],
            ),
            iam.PolicyStatement(
                sid="DeadLetter",
                actions=["sqs:SendMessage"],
                resources=[self.dead_letters.queue_arn],
            ),
            iam.PolicyStatement(
                sid="WritePipeLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            ),
        ):
            self.role.add_to_policy(statement)
        self.pipe = pipes.CfnPipe(
            self,
            "Pipe",
            description=f"Open Agents events outbox ({config.stage}): table stream -> domain bus",
            role_arn=self.role.role_arn,
            source=stream_arn,
            source_parameters=pipes.CfnPipe.PipeSourceParametersProperty(
                dynamo_db_stream_parameters=pipes.CfnPipe.PipeSourceDynamoDBStreamParametersProperty(
                    starting_position="TRIM_HORIZON",  # nothing committed before it ran is skipped
                    batch_size=BATCH_SIZE,
                    maximum_batching_window_in_seconds=0,  # publish as soon as written
                    parallelization_factor=1,  # one batch at a time per shard: in order
                    maximum_retry_attempts=RETRY_ATTEMPTS,
                    maximum_record_age_in_seconds=int(MAX_RECORD_AGE.to_seconds()),
                    on_partial_batch_item_failure="AUTOMATIC_BISECT",
                    dead_letter_config=pipes.CfnPipe.DeadLetterConfigProperty(
                        arn=self.dead_letters.queue_arn
                    ),
                ),
                filter_criteria=pipes.CfnPipe.FilterCriteriaProperty(
                    filters=[pipes.CfnPipe.FilterProperty(pattern=json.dumps(FILTER))]
                ),
            ),
            enrichment=self.enrichment.function.function_arn,
            target=bus.event_bus_arn,
            target_parameters=pipes.CfnPipe.PipeTargetParametersProperty(
                event_bridge_event_bus_parameters=pipes.CfnPipe.PipeTargetEventBridgeEventBusParametersProperty(
                    detail_type="$.name",  # the envelope's name is the detail-type
                    source="$.source",
                    time="$.time",
                ),
            ),
            log_configuration=pipes.CfnPipe.PipeLogConfigurationProperty(
                level="ERROR",
                cloudwatch_logs_log_destination=pipes.CfnPipe.CloudwatchLogsLogDestinationProperty(
                    log_group_arn=self.log_group.log_group_arn
                ),
            ),
        )
        self.pipe.node.add_dependency(self.role)  # the role's policy exists before the pipe
