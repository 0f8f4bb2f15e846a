"""Synthesize the CDK app in-process, once per configuration, with no AWS credentials and no
Docker: functions and core are staged into a temporary build dir (fast copies) and the deps
layer is a tiny placeholder folder (context ``depsLayerDir``), so tests never need PyPI."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
for _name in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
    os.environ.pop(_name, None)

from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from infra import build  # noqa: E402
from infra.app import compose  # noqa: E402
from infra.stack import OpenAgentsStack  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPA_ORIGIN = "http://localhost:5173"
ISSUER = "https://login.example.com/realms/agents"
WEB_ACL = "arn:aws:wafv2:us-east-1:123456789012:global/webacl/x/abc"
GITHUB_TOKEN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:platform/github-token-AbCdEf"
GITHUB_APP_KEY = "arn:aws:secretsmanager:us-east-1:123456789012:secret:platform/github-app-AbCdEf"
PROXY = "http://egress-proxy.internal:3128"  # an allow-listing proxy inside the VPC
# the agent's model in the stages the least-privilege flow runs a turn against (dev, ext): a
# cross-region inference profile, so the agent role has both Bedrock statements
PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@dataclass
class Synth:
    stack: OpenAgentsStack
    template: Template
    data: dict[str, Any]  # the template as JSON
    path: Path  # the template file
    report: dict[str, Any]  # cdk.out/validation-report.json (cdk-nag)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.data["Resources"].items() if v["Type"] == kind}

    def one(self, kind: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(kind)
        assert len(found) == 1, f"{kind}: {sorted(found)}"
        return next(iter(found.items()))

    def logical_id(self, construct: Any) -> str:
        return str(self.stack.get_logical_id(construct.node.default_child))

    def function(self, handler: str) -> tuple[str, dict[str, Any]]:
        """The Lambda function with this handler string: (logical id, properties)."""
        found = [
            (k, v["Properties"])
            for k, v in self.resources("AWS::Lambda::Function").items()
            if v["Properties"].get("Handler") == handler
        ]
        assert len(found) == 1, f"{handler}: {[k for k, _ in found]}"
        return found[0]


def cdk_context() -> dict[str, Any]:
    """The feature flags from cdk.json: tests synth exactly what `cdk synth` does."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("build")
    for name in build.function_names():
        build.stage_function(name, folder)
    build.stage_core(folder)
    build.stage_placeholder_deps(folder)
    return folder


@pytest.fixture(scope="session")
def synth(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Synth]:
    """``synth(**context)``: one synthesized stage. The cdk-nag gate runs inside app.synth()."""

    def run(**context: Any) -> Synth:
        outdir = tmp_path_factory.mktemp("cdk.out")
        app = App(
            outdir=str(outdir),
            context={
                **cdk_context(),
                "aws:cdk:disable-asset-staging": True,  # no copy of the assets into cdk.out
                "buildDir": str(build_dir),
                "depsLayerDir": str(build_dir / "layers" / "deps-placeholder"),
                **context,
            },
        )
        stack = compose(app)
        assembly = app.synth()  # raises when cdk-nag finds anything unacknowledged
        artifact = assembly.get_stack_artifact(stack.artifact_id)
        path = outdir / artifact.template_file
        data = json.loads(path.read_text())
        report = json.loads((outdir / "validation-report.json").read_text())
        return Synth(stack, Template.from_json(data), data, path, report)

    return run


@pytest.fixture(scope="session")
def dev(synth: Callable[..., Synth]) -> Synth:
    """The default stage (a Cognito pool, no WAF), with a dev-server origin for CORS and the
    agent on a Bedrock inference profile."""
    return synth(spaOrigins=SPA_ORIGIN, agentModels=f"bedrock/{PROFILE}")


@pytest.fixture(scope="session")
def prod(synth: Callable[..., Synth]) -> Synth:
    """A production stage in us-east-1 with WAF protection on."""
    return synth(stage="prod", prod="true", protection="true", region="us-east-1")


@pytest.fixture(scope="session")
def ext(synth: Callable[..., Synth]) -> Synth:
    """The other toggles in one stage: workspaces on EFS, an existing OIDC issuer instead of
    Cognito, an existing web ACL, an existing GitHub token secret, Container Insights on outside
    prod, two NAT gateways, sandbox egress only through a proxy; the agent on a Bedrock inference
    profile."""
    return synth(
        stage="ext",
        agentModels=f"bedrock/{PROFILE}",
        sandboxStorage="efs",
        jwtIssuer=ISSUER,
        jwtAudience="agents-spa,agents-cli",
        webAclArn=WEB_ACL,
        githubTokenSecretArn=GITHUB_TOKEN,
        containerInsights="true",
        natGateways="2",
        sandboxEgress="proxy",
        sandboxEgressProxy=PROXY,
    )


@pytest.fixture(scope="session")
def closed(synth: Callable[..., Synth]) -> Synth:
    """Sandboxes with no egress but the VPC endpoints their tasks need (EBS workspaces)."""
    return synth(stage="closed", sandboxEgress="none")


@pytest.fixture(scope="session")
def github_app(synth: Callable[..., Synth]) -> Synth:
    """A stage whose functions reach GitHub as a GitHub App (its key an existing secret)."""
    return synth(stage="app", githubAppId="123456", githubAppPrivateKeySecretArn=GITHUB_APP_KEY)


@pytest.fixture(scope="session")
def stages(dev: Synth, prod: Synth, ext: Synth, closed: Synth) -> tuple[Synth, ...]:
    return (dev, prod, ext, closed)
