"""The event rules on one machine: the same rules as the CDK app's EventBridge rules, run by the
in-process bus. Each target calls a Lambda entry point by handler string (as the schedules do)
and retries with exponential backoff, as EventBridge retries a failed asynchronous invocation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from openagents.local.lambda_context import LocalLambdaContext
from openagents.local.stepfunctions import resolve
from openagents.settings import Settings
from openagents.workflows import catalog

log = logging.getLogger(__name__)
Target = Callable[[dict[str, Any]], object]


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """The subset of EventBridge pattern matching the catalog's rules use: lists of allowed
    values, nested objects."""
    for key, allowed in pattern.items():
        value = event.get(key)
        if isinstance(allowed, dict):
            if not isinstance(value, dict) or not matches(allowed, value):
                return False
        elif value not in allowed:
            return False
    return True


def target(function: str, pattern: dict[str, Any], settings: Settings) -> Target:
    def deliver(envelope: dict[str, Any]) -> object:
        if not matches(pattern, envelope):
            return None
        handler = resolve(catalog.FUNCTIONS[function])
        attempts = settings.archive_retry_attempts
        for attempt in range(attempts):
            try:
                return handler(envelope, LocalLambdaContext(function_name=f"openagents-{function}"))
            except Exception as exc:
                if attempt + 1 >= attempts:
                    raise
                delay = settings.archive_retry_base_seconds * 2**attempt
                log.warning("%s failed (%s); retrying in %.1f s", function, exc, delay)
                time.sleep(delay)
        return None

    return deliver


def local_rules(settings: Settings) -> dict[str, list[Target]]:
    rules: dict[str, list[Target]] = {}
    for rule in catalog.RULES.values():
        for detail_type in rule["pattern"]["detail-type"]:
            rules.setdefault(detail_type, []).append(
                target(rule["function"], rule["pattern"], settings)
            )
    return rules
