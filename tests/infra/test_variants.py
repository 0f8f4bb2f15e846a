"""Stage toggles: WAF protection, an existing JWT issuer, and config validation."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App

from infra.config import StageConfig
from tests.infra.conftest import GITHUB_APP_KEY as APP_KEY
from tests.infra.conftest import ISSUER, Synth


def test_prod_has_a_cloudfront_web_acl_with_bot_control_and_rate_limit(prod: Synth) -> None:
    logical, acl = prod.one("AWS::WAFv2::WebACL")
    props = acl["Properties"]
    assert props["Scope"] == "CLOUDFRONT"
    assert props["DefaultAction"] == {"Allow": {}}
    rules = {r["Name"]: r for r in props["Rules"]}
    assert rules["RateLimit"]["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "IP"
    assert rules["RateLimit"]["Action"] == {"Block": {}}
    bot = rules["BotControl"]["Statement"]["ManagedRuleGroupStatement"]
    assert (bot["VendorName"], bot["Name"]) == ("AWS", "AWSManagedRulesBotControlRuleSet")
    assert rules["BotControl"]["OverrideAction"] == {"Count": {}}  # label; the app decides
    header = rules["BotHeader"]["Action"]["Count"]["CustomRequestHandling"]["InsertHeaders"]
    # WAF prefixes x-amzn-waf-: the API reads x-amzn-waf-bot-category (settings.waf_bot_header)
    assert header == [{"Name": "bot-category", "Value": "bot"}]
    assert rules["BotControl"]["Priority"] < rules["BotHeader"]["Priority"]
    config = prod.one("AWS::CloudFront::Distribution")[1]["Properties"]["DistributionConfig"]
    assert config["WebACLId"] == {"Fn::GetAtt": [logical, "Arn"]}
    _, logging = prod.one("AWS::WAFv2::LoggingConfiguration")
    assert logging["Properties"]["RedactedFields"] == [{"SingleHeader": {"Name": "authorization"}}]


def test_prod_requires_mfa(prod: Synth) -> None:
    prod.template.has_resource_properties("AWS::Cognito::UserPool", {"MfaConfiguration": "ON"})


def test_dev_has_no_web_acl(dev: Synth) -> None:
    dev.template.resource_count_is("AWS::WAFv2::WebACL", 0)


def test_existing_issuer_replaces_cognito(ext: Synth) -> None:
    issuer = ext
    issuer.template.resource_count_is("AWS::Cognito::UserPool", 0)
    issuer.template.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {
            "AuthorizerType": "JWT",
            "JwtConfiguration": {"Issuer": ISSUER, "Audience": ["agents-spa", "agents-cli"]},
        },
    )
    config = issuer.one("AWS::CloudFront::Distribution")[1]["Properties"]["DistributionConfig"]
    assert config["WebACLId"].startswith("arn:aws:wafv2:us-east-1:")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"protection": "true", "region": "eu-west-1"}, "must live in us-east-1"),
        ({"jwtIssuer": ISSUER}, "go together"),
        ({"jwtIssuer": "http://insecure", "jwtAudience": "a"}, "https://"),
        ({"stage": "Prod_1"}, "stage"),
        ({"spaOrigins": "https://app.example.com/path"}, "origin"),
        ({"protection": "true", "webAclArn": "arn:x"}, "exclude"),
        ({"sandboxStorage": "nfs"}, "sandboxStorage"),
        ({"sandboxCpu": "3000"}, "sandboxCpu"),
        ({"sandboxCpu": "1024", "sandboxMemoryMiB": "1024"}, "sandboxMemoryMiB"),
        ({"natGateways": "3"}, "natGateways"),
        ({"githubAppId": "123456"}, "githubAppId and githubAppPrivateKeySecretArn go together"),
        ({"githubAppPrivateKeySecretArn": APP_KEY}, "go together"),
        ({"githubAppId": "my-app", "githubAppPrivateKeySecretArn": APP_KEY}, "GitHub App id"),
        ({"githubAppId": "1", "githubAppPrivateKeySecretArn": "arn:x"}, "not a Secrets Manager"),
    ],
)
def test_config_rejects_bad_context(context: dict[str, Any], message: str) -> None:
    app = App(context=context)
    with pytest.raises(ValueError, match=message):
        StageConfig.from_context(app.node)


def test_config_defaults() -> None:
    config = StageConfig.from_context(App().node)
    assert (config.stage, config.prod, config.protection) == ("dev", False, False)
    assert config.stack_name == "OpenAgents-dev"
    assert config.create_user_pool
    assert config.deps_layer == config.build_dir / "layers" / "deps"
    assert (config.sandbox_storage, config.nat_gateway_count, config.insights) == ("ebs", 1, False)
    prod = StageConfig.from_context(App(context={"prod": "true"}).node)
    assert (prod.nat_gateway_count, prod.insights) == (2, True)
