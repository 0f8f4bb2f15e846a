"""Workflows: every ASL file in infra/statemachines is sound (the ASL gate), and each is deployed
as a STANDARD state machine whose placeholders are the ARNs of functions built with the
catalog's handler strings, with logging, tracing and a role that invokes only those."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from openagents.workflows import catalog

from infra.constructs.events import RULE_MAX_EVENT_AGE, RULE_RETRY_ATTEMPTS
from infra.constructs.workflows import STATEMACHINES_DIR, catalog_functions
from tests.infra.conftest import Synth
from tests.infra.iam import Resolver

ASL_FILES = sorted(STATEMACHINES_DIR.glob("*.asl.json"))
ANY_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"


# ------------------------------------------------------------------ the ASL gate


def _states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state, nested ones (Parallel branches, Map iterators) included."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in definition["States"].items():
        found[name] = state
        for branch in state.get("Branches", []):
            found |= _states(branch)
        for key in ("Iterator", "ItemProcessor"):
            if key in state:
                found |= _states(state[key])
    return found


def _targets(state: dict[str, Any]) -> list[str]:
    targets = [state[key] for key in ("Next", "Default") if key in state]
    targets += [catch["Next"] for catch in state.get("Catch", [])]
    targets += [choice["Next"] for choice in state.get("Choices", [])]
    return targets


def test_every_asl_file_is_in_the_catalog() -> None:
    assert ASL_FILES, "no ASL files"
    assert {path.name for path in ASL_FILES} == set(catalog.STATE_MACHINES.values())


@pytest.mark.parametrize("path", ASL_FILES, ids=lambda p: p.name)
def test_asl_file_is_sound(path: Path) -> None:
    text = path.read_text()
    definition = json.loads(text)  # parses as JSON
    # every placeholder names a catalog function
    placeholders = ANY_PLACEHOLDER.findall(text)
    assert placeholders, "a workflow calls at least one function"
    for placeholder in placeholders:
        match = re.fullmatch(r"(\w+)FunctionArn", placeholder)
        assert match, f"unknown placeholder ${{{placeholder}}}"
        assert match.group(1).lower() in catalog.FUNCTIONS, placeholder
        assert catalog.placeholder(match.group(1).lower()) == placeholder
    # every transition lands on a state, every state is reachable, and a run can end
    states = _states(definition)
    assert definition["StartAt"] in definition["States"]
    reachable, todo = set(), [definition["StartAt"]]
    while todo:
        name = todo.pop()
        if name in reachable:
            continue
        reachable.add(name)
        for target in _targets(states[name]):
            assert target in states, f"{name} -> {target}: no such state"
            todo.append(target)
    assert reachable == set(definition["States"]), set(definition["States"]) - reachable
    terminal = [s for s in states.values() if s["Type"] in ("Succeed", "Fail") or s.get("End")]
    assert terminal, "no terminal state"
    for name, state in states.items():
        if state["Type"] not in ("Succeed", "Fail", "Choice") and not state.get("End"):
            assert "Next" in state, f"{name} neither ends nor moves on"
    # tasks are Lambda invocations of catalog functions only (moto's interpreter runs them)
    for name, state in states.items():
        if state["Type"] == "Task":
            assert state["Resource"] == LAMBDA_INVOKE, name
            function = state["Parameters"]["FunctionName"]
            assert ANY_PLACEHOLDER.fullmatch(function), f"{name}: {function}"
    # the file renders with real ARNs (what the one-machine runtime does)
    used = catalog.functions_used(text)
    rendered = catalog.render(text, {f: f"arn:aws:lambda:us-east-1:1:function:{f}" for f in used})
    assert "${" not in json.dumps(rendered)


# ------------------------------------------------------------------ the deployed machines


def _machines(synth: Synth) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        props["Properties"]["StateMachineName"]: (logical, props["Properties"])
        for logical, props in synth.resources("AWS::StepFunctions::StateMachine").items()
    }


def test_each_catalog_machine_is_standard_logged_and_traced(dev: Synth, prod: Synth) -> None:
    for synth, days in ((dev, 30), (prod, 365)):
        machines = _machines(synth)
        stage = synth.stack.config.stage
        assert set(machines) == {f"openagents-{stage}-{m}" for m in catalog.STATE_MACHINES}
        for _, props in machines.values():
            assert props["StateMachineType"] == "STANDARD"
            assert props["TracingConfiguration"] == {"Enabled": True}
            logging = props["LoggingConfiguration"]
            assert logging["Level"] == "ALL"
            assert logging["IncludeExecutionData"] is False
            (destination,) = logging["Destinations"]
            group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
            group_props = synth.data["Resources"][group]["Properties"]
            assert group_props["RetentionInDays"] == days
            assert group_props["LogGroupName"].startswith("/aws/vendedlogs/states/")


def test_definitions_are_the_asl_files_with_the_catalog_functions(dev: Synth) -> None:
    manifest = json.loads(dev.path.with_name(f"{dev.stack.artifact_id}.assets.json").read_text())
    files = {
        f"{asset_hash}.json": Path(asset["source"]["path"])
        for asset_hash, asset in manifest["files"].items()
    }
    functions = dev.resources("AWS::Lambda::Function")
    for machine, asl in catalog.STATE_MACHINES.items():
        logical, props = _machines(dev)[f"openagents-dev-{machine}"]
        # the definition is the ASL file itself, uploaded as an asset
        assert files[props["DefinitionS3Location"]["Key"]] == STATEMACHINES_DIR / asl
        # each placeholder is the ARN of a function built with the catalog's handler string
        used = catalog.functions_used((STATEMACHINES_DIR / asl).read_text())
        substitutions = props["DefinitionSubstitutions"]
        assert set(substitutions) == {catalog.placeholder(f) for f in used}
        invoked = []
        for function in used:
            target, attribute = substitutions[catalog.placeholder(function)]["Fn::GetAtt"]
            assert attribute == "Arn"
            assert functions[target]["Properties"]["Handler"] == catalog.FUNCTIONS[function]
            invoked.append({"Fn::GetAtt": [target, "Arn"]})
        # and the machine's role may invoke exactly those functions, and nothing else of Lambda
        role = props["RoleArn"]["Fn::GetAtt"][0]
        statements = [
            statement
            for policy in dev.resources("AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        lambda_statements = [s for s in statements if "lambda:" in json.dumps(s["Action"])]
        assert lambda_statements == [
            {
                "Action": "lambda:InvokeFunction",
                "Effect": "Allow",
                "Resource": invoked[0] if len(invoked) == 1 else invoked,
                "Sid": "InvokeTaskFunctions",
            }
        ], logical


def test_workflow_functions_shape(dev: Synth) -> None:
    timeouts = {"provisioner": 720, "lifecycle": 900, "archiver": 900}
    # the provisioner clones a private repository itself (the pack in /tmp, the bundle in memory)
    memory = {"provisioner": 2048, "lifecycle": 512, "archiver": 512}
    storage = {"provisioner": {"Size": 1024}}
    assert set(catalog_functions()) == set(timeouts)
    for name, handler in catalog.FUNCTIONS.items():
        _, props = dev.function(handler)
        # every control-plane function reaches sandboxd from the control-plane security group
        assert props["VpcConfig"]["SecurityGroupIds"] == [
            {"Fn::GetAtt": [dev.logical_id(dev.stack.sandbox.control_plane_sg), "GroupId"]}
        ]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["Timeout"] == timeouts[name]
        assert props["MemorySize"] == memory[name]
        assert props.get("EphemeralStorage") == storage.get(name)
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        env = props["Environment"]["Variables"]
        assert env["OPENAGENTS_MODE"] == "aws"
        assert env["POWERTOOLS_SERVICE_NAME"] == f"openagents-{name}"


def test_functions_get_the_state_machine_arns(dev: Synth) -> None:
    resolve = Resolver(dev.data)
    arns = {name: resolve({"Ref": logical}) for name, (logical, _) in _machines(dev).items()}
    for function in dev.resources("AWS::Lambda::Function").values():
        if function["Properties"]["Handler"] == "functions.outbox.handler.lambda_handler":
            continue  # the outbox pipe's enrichment starts no workflow
        env = function["Properties"]["Environment"]["Variables"]
        machines = json.loads(resolve(env["OPENAGENTS_STATE_MACHINES"]))
        assert machines == {m: arns[f"openagents-dev-{m}"] for m in catalog.STATE_MACHINES}
        assert env["OPENAGENTS_PROVISION_ON_CREATE"] == "true"
        assert "OPENAGENTS_STEPFUNCTIONS_ENDPOINT" not in env


def test_catalog_schedules_invoke_their_functions(dev: Synth) -> None:
    rules = {
        props["Properties"]["Description"]: props["Properties"]
        for props in dev.resources("AWS::Events::Rule").values()
        if "ScheduleExpression" in props["Properties"]
    }
    assert len(rules) == len(catalog.SCHEDULES)
    functions = dev.resources("AWS::Lambda::Function")
    for name, schedule in catalog.SCHEDULES.items():
        (rule,) = [r for d, r in rules.items() if d.startswith(f"Open Agents {name}:")]
        assert rule["ScheduleExpression"] == "rate(1 minute)"
        assert rule["State"] == "ENABLED"
        (target,) = rule["Targets"]
        logical = target["Arn"]["Fn::GetAtt"][0]
        assert (
            functions[logical]["Properties"]["Handler"] == catalog.FUNCTIONS[schedule["function"]]
        )
        assert json.loads(target["Input"]) == {"step": schedule["step"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0


def test_catalog_rules_invoke_their_functions(dev: Synth) -> None:
    rules = {
        props["Properties"]["Description"]: props["Properties"]
        for props in dev.resources("AWS::Events::Rule").values()
        if "EventPattern" in props["Properties"]
    }
    assert len(rules) == len(catalog.RULES)
    functions = dev.resources("AWS::Lambda::Function")
    bus = dev.logical_id(dev.stack.events.bus)
    queue = dev.logical_id(dev.stack.events.dead_letters)
    for name, spec in catalog.RULES.items():
        (rule,) = [r for d, r in rules.items() if d.startswith(f"Open Agents {name}:")]
        assert rule["EventBusName"] == {"Ref": bus}
        assert rule["EventPattern"] == spec["pattern"]
        (target,) = rule["Targets"]
        logical = target["Arn"]["Fn::GetAtt"][0]
        assert functions[logical]["Properties"]["Handler"] == catalog.FUNCTIONS[spec["function"]]
        assert "Input" not in target  # the function gets the event itself
        assert target["RetryPolicy"] == {
            "MaximumEventAgeInSeconds": RULE_MAX_EVENT_AGE.to_seconds(),
            "MaximumRetryAttempts": RULE_RETRY_ATTEMPTS,
        }
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue, "Arn"]}}
        # a failure inside the function is retried by Lambda (asynchronous invocation)
        configs = [
            c["Properties"]
            for c in dev.resources("AWS::Lambda::EventInvokeConfig").values()
            if c["Properties"]["FunctionName"] == {"Ref": logical}
        ]
        assert [c["MaximumRetryAttempts"] for c in configs] == [2]
    props = dev.resources("AWS::SQS::Queue")[queue]["Properties"]
    assert props["SqsManagedSseEnabled"] is True
    (policy,) = [  # the rules' queue (the outbox pipe's DLQ has its own policy)
        p
        for p in dev.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": queue} in p["Properties"]["Queues"]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )


def test_lifecycle_snapshot_wait_fits_its_timeout(dev: Synth) -> None:
    _, props = dev.function(catalog.FUNCTIONS["lifecycle"])
    env = props["Environment"]["Variables"]
    delay = float(env["OPENAGENTS_FARGATE_SNAPSHOT_WAIT_DELAY_SECONDS"])
    attempts = int(env["OPENAGENTS_FARGATE_SNAPSHOT_WAIT_MAX_ATTEMPTS"])
    assert delay * attempts < props["Timeout"]
    assert delay * attempts >= props["Timeout"] / 2  # still long enough for a large volume
