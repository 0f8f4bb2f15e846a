"""The task handlers are where the state machines' payloads meet the services' typed results:
every field an ASL task passes parses, every field its ``ResultSelector`` reads is produced,
and a payload that is not one of the steps is refused before any service runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openagents.services.archive import AutoArchived, Finalized
from openagents.services.lifecycle import Action, Decision
from openagents.services.provisioning import Prepared, Probed, Settled, Started
from openagents.workflows import TaskError
from pydantic import BaseModel, ValidationError

from functions.archiver.handler import payload as archive_payload
from functions.lifecycle.handler import LoopStep, Reconcile
from functions.lifecycle.handler import payload as decision_payload
from functions.lifecycle.handler import run_step as lifecycle_step
from functions.provisioner.handler import Step
from functions.provisioner.handler import payload as provisioning_payload
from functions.provisioner.handler import run_step as provisioning_step

STATEMACHINES = Path(__file__).resolve().parents[2] / "infra" / "statemachines"
SAMPLE: dict[str, Any] = {
    "sessionId": "sess-1",
    "generation": 2,
    "attempts": 3,
    "runId": "lifecycle-1-ab",
    "error": {"Error": "SandboxError", "Cause": '{"errorMessage": "boom"}'},
}
# Every result each machine's steps can give, as the handlers turn them into task output.
OUTPUTS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "provisioning": {
        "start": [
            provisioning_payload(Started(started=True)),
            provisioning_payload(Started(started=True, retry=True)),
            provisioning_payload(Started(started=False, reason="session is archived")),
        ],
        "probe": [provisioning_payload(Probed(ready=False, attempts=1))],
        "prepare": [
            provisioning_payload(Prepared(branch="main")),
            provisioning_payload(Prepared(branch=None, from_bundle=True)),
        ],
        "activate": [provisioning_payload(Settled(state="active"))],
        "fail": [provisioning_payload(Settled(state="gone"))],
    },
    "lifecycle": {
        step: [
            decision_payload(Decision(Action.WAIT, datetime(2026, 12, 1, 12, 0, 0, 1, UTC))),
            decision_payload(Decision(Action.HIBERNATE)),
            decision_payload(Decision(Action.EXIT, reason="run-replaced")),
        ]
        for step in ("claim", "evaluate", "hibernate", "recover")
    },
}
PARSERS: dict[str, type[BaseModel]] = {"provisioning": Step, "lifecycle": LoopStep}


def _tasks(machine: str) -> list[dict[str, Any]]:
    definition = json.loads((STATEMACHINES / f"{machine}.asl.json").read_text())
    return [s for s in definition["States"].values() if s["Type"] == "Task"]


@pytest.mark.parametrize("machine", sorted(PARSERS))
def test_every_asl_payload_parses_and_every_selected_field_is_produced(machine: str) -> None:
    for task in _tasks(machine):
        sent = task["Parameters"]["Payload"]
        event = {
            key.removesuffix(".$"): SAMPLE.get(key.removesuffix(".$"), v) for key, v in sent.items()
        }
        parsed = PARSERS[machine].model_validate(event)
        assert parsed.step == sent["step"]  # type: ignore[attr-defined]
        selected = {
            path.removeprefix("$.Payload.")
            for path in task.get("ResultSelector", {}).values()
            if path.startswith("$.Payload.")
        }
        for output in OUTPUTS[machine][sent["step"]]:
            assert selected <= output.keys(), (task, output)


def test_the_wait_time_is_rounded_up_to_a_whole_second() -> None:
    late = decision_payload(Decision(Action.WAIT, datetime(2026, 12, 1, 12, 0, 0, 1, UTC)))
    whole = decision_payload(Decision(Action.WAIT, datetime(2026, 12, 1, 12, 0, 0, 0, UTC)))
    assert late == {"action": "wait", "wakeAt": "2026-12-01T12:00:01Z", "reason": None}
    assert whole["wakeAt"] == "2026-12-01T12:00:00Z"
    assert decision_payload(Decision(Action.EXIT, reason="hibernated")) == {
        "action": "exit",
        "wakeAt": None,
        "reason": "hibernated",
    }


def test_the_caught_error_is_typed() -> None:
    step = LoopStep.model_validate({**SAMPLE, "step": "recover"})
    assert step.error == TaskError(error="SandboxError", cause='{"errorMessage": "boom"}')
    assert Step.model_validate({**SAMPLE, "step": "fail", "error": {}}).error == TaskError()
    assert Reconcile.model_validate({"step": "reconcile", "checkAll": True}).check_all


def test_results_keep_their_wire_names() -> None:
    assert provisioning_payload(Started(started=True)) == {"started": True}
    assert provisioning_payload(Prepared(branch=None, from_bundle=True)) == {
        "branch": None,
        "fromBundle": True,
    }
    assert archive_payload(Finalized(finalized=True, bundle="bundles/s/1.bundle")) == {
        "finalized": True,
        "bundle": "bundles/s/1.bundle",
    }
    assert archive_payload(Finalized(finalized=False, reason="not-archived")) == {
        "finalized": False,
        "reason": "not-archived",
    }
    assert archive_payload(AutoArchived(stale=2, archived=1)) == {"stale": 2, "archived": 1}


@pytest.mark.parametrize(
    "event",
    [
        {"step": "explode", "sessionId": "s", "generation": 1},
        {"step": "start", "generation": 1},
        {"step": "probe", "sessionId": "s", "generation": "two"},
    ],
)
def test_a_bad_provisioning_payload_is_refused_before_any_service(event: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        provisioning_step(_NoContainer(), event)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event",
    [
        {"step": "explode", "sessionId": "s", "runId": "r"},
        {"step": "claim", "sessionId": "s"},
        {"step": "recover", "sessionId": "s", "runId": "r", "error": "not an object"},
    ],
)
def test_a_bad_lifecycle_payload_is_refused_before_any_service(event: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        lifecycle_step(_NoContainer(), event)  # type: ignore[arg-type]


class _NoContainer:
    """A container whose services must not be reached."""

    @property
    def provisioning(self) -> Any:
        return _Unreachable()

    @property
    def lifecycle(self) -> Any:
        return _Unreachable()


class _Unreachable:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a service was called ({name}) for a refused payload")
