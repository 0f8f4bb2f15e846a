"""The events outbox's enrichment: EventBridge Pipes hands it a batch of DynamoDB stream records
of outbox items (the pipe's filter keeps only INSERTs of ``O#`` sort keys) and puts what it
returns on the domain bus, one event per element: the element is the event's ``detail`` (the
versioned envelope), and the pipe's target parameters read the detail-type, source and time from
it (``$.name``, ``$.source``, ``$.time``) — the PutEvents entry ``events/eventbridge.py`` sent.

Why a function and not an input template: the item holds the envelope as a JSON string (its data
fields differ per event), and a template can only paste that string, not parse it into the
``detail`` object. A record that cannot be read raises: the pipe retries the batch (bisecting
it) and then dead-letters it (``infra/constructs/outbox.py``).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from openagents.observability import traced
from openagents.store.mapping import stream_detail

SERVICE = "openagents-outbox"
logger = Logger(service=SERVICE)


@logger.inject_lambda_context(clear_state=True)
@traced(SERVICE)
def lambda_handler(records: list[dict[str, Any]], context: LambdaContext) -> list[dict[str, Any]]:
    details = [stream_detail(record) for record in records]
    logger.debug("enriched %d outbox records", len(details))
    return details
