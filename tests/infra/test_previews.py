"""The preview gateway (on with ``previewDomain``): a wildcard certificate and DNS record, an
internet-facing ALB (HTTPS only, HTTP redirected), an autoscaled Fargate service running the
API's preview proxy, the sandbox security group admitting it on sandboxd's port only, and a
task role that reads the session, records its activity and finds its task: nothing more. The
stage passes the same gates (cdk-nag, cfn-lint) as the others."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra import nag
from infra.config import StageConfig
from infra.constructs.previews import GATEWAY_PORT, HEALTH_PATH
from infra.constructs.sandbox import SANDBOX_PORT
from tests.infra.conftest import ROOT, Synth
from tests.infra.test_gates import CFN_LINT

DOMAIN = "preview.agents.example.com"
ZONE = "Z0123456789ABCDEFGHIJ"
HERE = {"region": "eu-west-1"}


@pytest.fixture(scope="module")
def previews(synth: Callable[..., Synth]) -> Synth:
    return synth(stage="pv", previewDomain=DOMAIN, previewHostedZoneId=ZONE, region="eu-west-1")


def _by_logical(synth: Synth, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = synth.data["Resources"][synth.logical_id(construct)]["Properties"]
    return found


def test_off_unless_a_domain_is_given(dev: Synth) -> None:
    assert dev.stack.previews is None
    assert not dev.resources("AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert not dev.resources("AWS::CertificateManager::Certificate")
    for bad in (
        {"preview_domain": DOMAIN, "region": "eu-west-1"},  # without its zone
        {"preview_domain": DOMAIN, "preview_hosted_zone_id": ZONE},  # without a region
        {"preview_domain": "Preview.Example.com", "preview_hosted_zone_id": ZONE, **HERE},
        {"preview_domain": DOMAIN, "preview_hosted_zone_id": "nope", **HERE},
        {"preview_domain": DOMAIN, "preview_hosted_zone_id": ZONE,
         "preview_hosted_zone_name": "other.org", **HERE},
        {"preview_domain": DOMAIN, "preview_hosted_zone_id": ZONE, "preview_max_tasks": 0,
         **HERE},
    ):  # fmt: skip
        with pytest.raises(ValueError, match="preview"):
            StageConfig(**bad)


def test_a_wildcard_certificate_and_record_in_the_zone(previews: Synth) -> None:
    _, cert = previews.one("AWS::CertificateManager::Certificate")
    props = cert["Properties"]
    assert props["DomainName"] == f"*.{DOMAIN}"
    assert props["ValidationMethod"] == "DNS"
    assert props["DomainValidationOptions"][0]["HostedZoneId"] == ZONE
    records = previews.resources("AWS::Route53::RecordSet")
    (record,) = [r["Properties"] for r in records.values() if r["Properties"]["Type"] == "A"]
    assert record["Name"] == f"*.{DOMAIN}."
    assert record["HostedZoneId"] == ZONE
    assert "DNSName" in record["AliasTarget"]
    previews.template.has_output("PreviewDomain", {"Value": DOMAIN})


def test_the_alb_is_public_https_only_and_logs(previews: Synth) -> None:
    _, alb = previews.one("AWS::ElasticLoadBalancingV2::LoadBalancer")
    props = alb["Properties"]
    assert props["Scheme"] == "internet-facing"
    attributes = {a["Key"]: a["Value"] for a in props["LoadBalancerAttributes"]}
    assert attributes["access_logs.s3.enabled"] == "true"
    assert attributes["routing.http.drop_invalid_header_fields.enabled"] == "true"
    assert int(attributes["idle_timeout.timeout_seconds"]) >= 600  # hot-reload WebSockets
    listeners = {
        item["Properties"]["Port"]: item["Properties"]
        for item in previews.resources("AWS::ElasticLoadBalancingV2::Listener").values()
    }
    assert set(listeners) == {80, 443}
    assert listeners[443]["Protocol"] == "HTTPS"
    assert listeners[443]["SslPolicy"].startswith("ELBSecurityPolicy-TLS13")
    assert listeners[80]["DefaultActions"][0]["Type"] == "redirect"
    assert listeners[80]["DefaultActions"][0]["RedirectConfig"]["Protocol"] == "HTTPS"
    _, group = previews.one("AWS::ElasticLoadBalancingV2::TargetGroup")
    assert group["Properties"]["HealthCheckPath"] == HEALTH_PATH
    assert group["Properties"]["Port"] == GATEWAY_PORT
    assert group["Properties"]["TargetType"] == "ip"


def _ingress(synth: Synth, group: Any) -> list[dict[str, Any]]:
    """Every ingress rule of a security group: inline, and the separate resources."""
    logical = synth.logical_id(group)
    rules = list(_by_logical(synth, group).get("SecurityGroupIngress", []))
    for item in synth.resources("AWS::EC2::SecurityGroupIngress").values():
        target = item["Properties"]["GroupId"]
        if target == {"Fn::GetAtt": [logical, "GroupId"]}:
            rules.append(item["Properties"])
    return rules


def test_the_sandboxes_admit_the_gateway_on_sandboxds_port_only(previews: Synth) -> None:
    stack = previews.stack
    assert stack.previews is not None
    gateway = previews.logical_id(stack.previews.gateway_sg)
    rules = _ingress(previews, stack.sandbox.sandbox_sg)
    from_gateway = [
        r for r in rules
        if r.get("SourceSecurityGroupId") == {"Fn::GetAtt": [gateway, "GroupId"]}
    ]  # fmt: skip
    assert [(r["FromPort"], r["ToPort"], r["IpProtocol"]) for r in from_gateway] == [
        (SANDBOX_PORT, SANDBOX_PORT, "tcp")
    ]
    assert not any("CidrIp" in r for r in rules)  # nothing from an address range
    # the gateway: from the ALB only, on its own port
    alb = previews.logical_id(stack.previews.alb_sg)
    (into,) = _ingress(previews, stack.previews.gateway_sg)
    assert into["SourceSecurityGroupId"] == {"Fn::GetAtt": [alb, "GroupId"]}
    assert (into["FromPort"], into["ToPort"]) == (GATEWAY_PORT, GATEWAY_PORT)
    out = _by_logical(previews, stack.previews.gateway_sg)["SecurityGroupEgress"]
    assert {(r.get("FromPort"), r.get("CidrIp")) for r in out} == {(443, "0.0.0.0/0")}


def test_the_gateway_is_an_autoscaled_fargate_service_running_the_preview_proxy(
    previews: Synth,
) -> None:
    stack = previews.stack
    assert stack.previews is not None
    service = _by_logical(previews, stack.previews.service)
    assert service["LaunchType"] == "FARGATE"
    network = service["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    _, target = previews.one("AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 4)
    _, policy = previews.one("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert policy["Properties"]["PolicyType"] == "TargetTrackingScaling"
    definitions = [
        d["Properties"]
        for d in previews.resources("AWS::ECS::TaskDefinition").values()
        if d["Properties"]["Family"].endswith("preview-gateway")
    ]
    (definition,) = definitions
    assert definition["RuntimePlatform"]["CpuArchitecture"] == "ARM64"
    (container,) = definition["ContainerDefinitions"]
    assert container["ReadonlyRootFilesystem"] is True
    variables = {v["Name"]: v["Value"] for v in container["Environment"]}
    assert variables["OPENAGENTS_PREVIEW_DOMAIN"] == DOMAIN
    assert variables["OPENAGENTS_MODE"] == "aws"
    assert "OPENAGENTS_SANDBOX_TOKEN_SECRET_ARN" in variables
    assert not any("GITHUB" in name or "ORIGIN_SECRET" in name for name in variables)
    # the API signs links for the same domain
    _, api = previews.function("functions.api.handler.lambda_handler")
    assert api["Environment"]["Variables"]["OPENAGENTS_PREVIEW_DOMAIN"] == DOMAIN


def test_the_image_runs_the_gateway_module_with_the_projects_pins() -> None:
    dockerfile = (ROOT / "infra/previews/Dockerfile").read_text()
    assert '"-m", "functions.api.preview_gateway"' in dockerfile
    assert "USER 10001" in dockerfile
    pins = {
        line.split("==")[0]: line
        for line in (ROOT / "infra/previews/requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    project = (ROOT / "pyproject.toml").read_text()
    for line in pins.values():
        assert f'"{line}"' in project, f"{line}: not pyproject.toml's pin"
    dependencies = project.split("dependencies = [", 1)[1].split("]\n", 1)[0]
    wanted = re.findall(r'"([A-Za-z0-9_.\[\]-]+)==', dependencies)
    assert set(wanted) <= set(pins), set(wanted) - set(pins)


def test_the_task_role_reads_the_session_and_finds_its_task_only(previews: Synth) -> None:
    stack = previews.stack
    assert stack.previews is not None
    ref = {"Ref": previews.logical_id(stack.previews.task_role)}
    documents = [
        p["Properties"]["PolicyDocument"]
        for p in previews.resources("AWS::IAM::Policy").values()
        if ref in p["Properties"]["Roles"]
    ]
    actions: set[str] = set()
    for document in documents:
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow"
            found = statement["Action"]
            actions |= set([found] if isinstance(found, str) else found)
    assert actions == {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
        "ecs:DescribeTasks",
        "secretsmanager:GetSecretValue",
    }
    # the token key's resource policy lets this role read it
    stack_text = previews.path.read_text()
    assert previews.logical_id(stack.previews.task_role) in stack_text


def test_the_preview_stage_passes_the_gates(previews: Synth) -> None:
    (report,) = [r for r in previews.report["pluginReports"] if r["pluginName"] == nag.PACK]
    assert report["conclusion"] == "success"
    assert report["violations"] == []
    suppressed = {
        (v["acknowledgedAt"], v["acknowledgedId"]) for v in report["suppressedViolations"]
    }
    made = {
        (a.path, a.id)
        for a in nag.ACKNOWLEDGED
        if a.path.startswith(f"{previews.stack.node.path}/Previews/")
    }
    assert made
    assert made <= suppressed, f"acknowledged but not found: {sorted(made - suppressed)}"
    result = subprocess.run(
        [str(CFN_LINT), "--ignore-checks", "W3005", "--", str(Path(previews.path))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
