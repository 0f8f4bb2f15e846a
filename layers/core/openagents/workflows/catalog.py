"""What runs where: Lambda task handlers by name and the state machines that call them.

The CDK app and the one-machine runtime both read this: a handler string is the import path of
the Lambda entry point (asset root equals import root), and an ASL file's ``${<Name>FunctionArn}``
placeholders are replaced with the functions' ARNs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

FUNCTIONS: dict[str, str] = {
    "provisioner": "functions.provisioner.handler.lambda_handler",
    "lifecycle": "functions.lifecycle.handler.lambda_handler",
    "archiver": "functions.archiver.handler.lambda_handler",
}

STATE_MACHINES: dict[str, str] = {
    "provisioning": "provisioning.asl.json",
    "lifecycle": "lifecycle.asl.json",
}

# Scheduled entry points (EventBridge schedule on AWS, a timer on one machine).
SCHEDULES: dict[str, dict[str, str]] = {
    "reconciler": {"function": "lifecycle", "step": "reconcile"},
    "auto-archive": {"function": "archiver", "step": "auto-archive"},
}

# Event rules on the custom bus (EventBridge rules on AWS, the in-process bus on one machine):
# the event pattern and the function its target invokes (asynchronously, with retries).
RULES: dict[str, dict[str, Any]] = {
    "archive-finalizer": {
        "function": "archiver",
        "pattern": {
            "source": ["openagents"],
            "detail-type": ["Session Archived"],
            "detail": {"finalize": [True]},
        },
    },
}

PLACEHOLDER = re.compile(r"\$\{(\w+)FunctionArn\}")


def placeholder(function: str) -> str:
    """``provisioner`` → ``ProvisionerFunctionArn`` (the CDK substitution key)."""
    return f"{function.capitalize()}FunctionArn"


def functions_used(definition_text: str) -> set[str]:
    return {match.lower() for match in PLACEHOLDER.findall(definition_text)}


def render(definition_text: str, function_arns: dict[str, str]) -> dict[str, Any]:
    """Substitute every ``${XFunctionArn}`` and parse; an unknown function is an error."""

    def arn(match: re.Match[str]) -> str:
        return function_arns[match.group(1).lower()]

    rendered: dict[str, Any] = json.loads(PLACEHOLDER.sub(arn, definition_text))
    return rendered


def definition_path(statemachines_dir: Path, machine: str) -> Path:
    return statemachines_dir / STATE_MACHINES[machine]
