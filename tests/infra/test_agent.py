"""The durable agent-turn function: runtime, durable configuration, network, the statements
the least-privilege flow (tests/infra/test_least_privilege.py) cannot prove by its recorded
calls, and what the API is given to start and stop turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from infra.constructs import agent
from infra.constructs.sandbox import SANDBOX_PORT
from tests.infra.conftest import Synth

PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture(scope="module")
def models(synth: Callable[..., Synth]) -> Synth:
    """A stage with an inference profile and a foundation model configured."""
    return synth(stage="agent", agentModels=f"bedrock/{PROFILE},{MODEL}")


def _agent(s: Synth) -> tuple[str, dict[str, Any]]:
    return s.function(agent.HANDLER)


def _statements(s: Synth, role: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for policy in s.resources("AWS::IAM::Policy").values():
        props = policy["Properties"]
        if {"Ref": role} in props["Roles"]:
            for statement in props["PolicyDocument"]["Statement"]:
                found[statement.get("Sid", "|".join(_list(statement["Action"])))] = statement
    return found


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role(props: dict[str, Any]) -> str:
    return str(props["Role"]["Fn::GetAtt"][0])


def test_runtime_durable_config_and_settings(models: Synth) -> None:
    _, props = _agent(models)
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props["DurableConfig"] == {"ExecutionTimeout": 86_400, "RetentionPeriodInDays": 14}
    assert props["Timeout"] == 900
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    env = props["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "openagents-agent"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "OpenAgents"
    assert env["OPENAGENTS_MODE"] == "aws"
    assert env["OPENAGENTS_MODELS"] == f"bedrock/{PROFILE},bedrock/{MODEL}"
    assert "OPENAGENTS_SANDBOX_TOKEN_SECRET_ARN" in env
    assert "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN" in env
    assert "OPENAGENTS_ORIGIN_SECRET_ARN" not in env
    # its own layers, for Python 3.13
    layers = models.resources("AWS::Lambda::LayerVersion")
    for ref in props["Layers"]:
        assert layers[ref["Ref"]]["Properties"]["CompatibleRuntimes"] == ["python3.13"]


def test_invoked_through_an_alias_of_its_current_version(models: Synth) -> None:
    logical, _ = _agent(models)
    (alias,) = models.resources("AWS::Lambda::Alias").values()
    assert alias["Properties"]["Name"] == agent.ALIAS
    assert alias["Properties"]["FunctionName"] == {"Ref": logical}


def test_in_the_vpc_with_its_own_group_the_sandboxes_admit(models: Synth) -> None:
    _, props = _agent(models)
    (group_ref,) = props["VpcConfig"]["SecurityGroupIds"]
    group = group_ref["Fn::GetAtt"][0]
    control = models.logical_id(models.stack.sandbox.control_plane_sg)
    sandbox = models.logical_id(models.stack.sandbox.sandbox_sg)
    assert group not in (control, sandbox)
    egress = models.resources("AWS::EC2::SecurityGroupEgress")
    ingress = models.resources("AWS::EC2::SecurityGroupIngress")
    from_agent = [
        r["Properties"]
        for r in ingress.values()
        if r["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [group, "GroupId"]}
    ]
    assert from_agent == [
        {
            "Description": "sandboxd from the agent turns",
            "FromPort": SANDBOX_PORT,
            "GroupId": {"Fn::GetAtt": [sandbox, "GroupId"]},
            "IpProtocol": "tcp",
            "SourceSecurityGroupId": {"Fn::GetAtt": [group, "GroupId"]},
            "ToPort": SANDBOX_PORT,
        }
    ]
    # the sandboxes admit sandboxd's port from the control plane and the agent only
    sources = {
        r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0]
        for r in ingress.values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sandbox, "GroupId"]}
    }
    assert sources == {control, group}
    to_sandbox = [
        r["Properties"]
        for r in egress.values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group, "GroupId"]}
    ]
    assert [e["DestinationSecurityGroupId"] for e in to_sandbox] == [
        {"Fn::GetAtt": [sandbox, "GroupId"]}
    ]
    inline = models.data["Resources"][group]["Properties"]
    assert inline["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "Bedrock and AWS APIs (NAT gateway, S3 and DynamoDB gateway endpoints)",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert "SecurityGroupIngress" not in inline


def _arn(s: Synth, value: Any) -> str:
    """A policy resource rendered the way cdk-nag prints it."""
    from infra import nag

    return nag._render(value)


def test_durable_checkpoints_on_the_functions_versions_only(models: Synth) -> None:
    """The durable runtime's own statement (the SDK's checkpoint calls, which the local runner
    of the least-privilege flow does not make). The rest of the role is proven by the flow's
    recorded calls (tests/infra/test_least_privilege.py): exactly what a turn uses."""
    _, props = _agent(models)
    durable = _statements(models, _role(props))["DurableCheckpoints"]
    assert sorted(_list(durable["Action"])) == list(agent.DURABLE_ACTIONS)
    assert _arn(models, durable["Resource"]) == (
        "arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:openagents-agent-agent:*"
    )
    assert "Condition" not in durable


def test_each_configured_model_on_its_own_arn(models: Synth) -> None:
    """A foundation model configured directly (the flow's turn uses an inference profile): its
    ARN in this region, next to the profile's; the profile's model only through the profile."""
    _, props = _agent(models)
    statements = _statements(models, _role(props))
    invoke = statements["InvokeModels"]
    assert invoke["Action"] == agent.MODEL_ACTION
    assert [_arn(models, r) for r in invoke["Resource"]] == [
        f"arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/{PROFILE}",
        f"arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/{MODEL}",
    ]
    through = statements["InvokeModelsThroughProfile"]
    assert _arn(models, through["Resource"]) == (
        "arn:<AWS::Partition>:bedrock:*::foundation-model/" + PROFILE.removeprefix("us.")
    )
    (profile_arn,) = through["Condition"]["StringEquals"].values()
    assert _arn(models, profile_arn).endswith(f":inference-profile/{PROFILE}")
    assert [s for s in statements if s.startswith("InvokeModels")] == [
        "InvokeModels",
        "InvokeModelsThroughProfile",
    ]


def test_no_model_configured_no_bedrock_statement(closed: Synth) -> None:
    _, props = _agent(closed)
    statements = _statements(closed, _role(props))
    assert not [s for s in statements.values() if "bedrock" in str(s["Action"])]
    assert "OPENAGENTS_MODELS" not in props["Environment"]["Variables"]


def test_the_api_is_given_the_alias_and_stops_turns(models: Synth) -> None:
    _, api = models.function("functions.api.handler.lambda_handler")
    (alias_id,) = models.resources("AWS::Lambda::Alias")
    env = api["Environment"]["Variables"]
    assert env["OPENAGENTS_AGENT_FUNCTION_ARN"] == {"Ref": alias_id}
    assert env["OPENAGENTS_MODELS"] == f"bedrock/{PROFILE},bedrock/{MODEL}"
    statements = _statements(models, _role(api))
    # the start (an invoke of the alias) is proven by the least-privilege flow; the stop of a
    # turn that does not honour its cancel flag is not in it
    stop = statements["StopAgentTurns"]
    assert sorted(_list(stop["Action"])) == [
        "lambda:ListDurableExecutionsByFunction",
        "lambda:StopDurableExecution",
    ]
    assert _arn(models, stop["Resource"]).endswith(":function:openagents-agent-agent:*")
