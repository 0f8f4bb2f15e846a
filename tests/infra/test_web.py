"""Web: private bucket behind CloudFront (OAC), SPA routing, security headers, /api/* origin."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from infra.constructs.web import ORIGIN_HEADER, SPA_ROUTER
from tests.infra.conftest import Synth

CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"


def _config(synth: Synth) -> dict[str, Any]:
    config: dict[str, Any] = synth.one("AWS::CloudFront::Distribution")[1]["Properties"][
        "DistributionConfig"
    ]
    return config


def test_spa_origin_is_the_private_bucket_through_oac(dev: Synth) -> None:
    config = _config(dev)
    default = config["DefaultCacheBehavior"]
    origins = {o["Id"]: o for o in config["Origins"]}
    s3_origin = origins[default["TargetOriginId"]]
    bucket = dev.logical_id(dev.stack.web.bucket)
    assert s3_origin["DomainName"] == {"Fn::GetAtt": [bucket, "RegionalDomainName"]}
    assert "OriginAccessControlId" in s3_origin
    assert s3_origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    assert default["ViewerProtocolPolicy"] == "redirect-to-https"
    assert default["FunctionAssociations"][0]["EventType"] == "viewer-request"
    assert config["DefaultRootObject"] == "index.html"
    # error-page rewrites would also swallow the API's 403/404: routing is the function's job
    assert "CustomErrorResponses" not in config
    assert "Logging" in config


def test_api_behind_the_same_distribution_uncached(dev: Synth) -> None:
    config = _config(dev)
    (api,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == "/api/*"]
    assert api["CachePolicyId"] == CACHING_DISABLED
    assert api["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
    assert set(api["AllowedMethods"]) == {
        "GET",
        "HEAD",
        "OPTIONS",
        "PUT",
        "PATCH",
        "POST",
        "DELETE",
    }
    assert api["ViewerProtocolPolicy"] == "https-only"
    origin = next(o for o in config["Origins"] if o["Id"] == api["TargetOriginId"])
    assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
    http_api = dev.logical_id(dev.stack.api.http_api)
    assert origin["DomainName"] == {
        "Fn::Select": [2, {"Fn::Split": ["/", {"Fn::GetAtt": [http_api, "ApiEndpoint"]}]}]
    }


def test_security_headers(dev: Synth) -> None:
    _, policy = dev.one("AWS::CloudFront::ResponseHeadersPolicy")
    headers = policy["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] == 31_536_000
    assert headers["FrameOptions"]["FrameOption"] == "DENY"
    assert headers["ContentTypeOptions"]["Override"] is True
    csp = headers["ContentSecurityPolicy"]["ContentSecurityPolicy"]
    assert "frame-ancestors 'none'" in str(csp)
    config = _config(dev)
    policy_id = {"Ref": dev.one("AWS::CloudFront::ResponseHeadersPolicy")[0]}
    assert config["DefaultCacheBehavior"]["ResponseHeadersPolicyId"] == policy_id
    assert all(b["ResponseHeadersPolicyId"] == policy_id for b in config["CacheBehaviors"])


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("/", "/index.html"),
        ("/sessions/abc", "/index.html"),
        ("/assets/app.3f2a.js", "/assets/app.3f2a.js"),
        ("/favicon.ico", "/favicon.ico"),
    ],
)
def test_spa_router_function(uri: str, expected: str) -> None:
    """The CloudFront Function's JavaScript, run by node (which the CDK needs anyway)."""
    script = SPA_ROUTER + f"console.log(handler({{request: {{uri: {uri!r}}}}}).uri);"
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_cloudfront_signs_api_requests_with_the_origin_secret(dev: Synth) -> None:
    """The execute-api endpoint stays on (CloudFront's origin needs it without a custom
    domain); CloudFront adds the origin-verify header, its value a dynamic reference to a
    generated secret, so the value is in no template."""
    config = _config(dev)
    (api,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == "/api/*"]
    origin = next(o for o in config["Origins"] if o["Id"] == api["TargetOriginId"])
    (header,) = origin["OriginCustomHeaders"]
    assert header["HeaderName"] == ORIGIN_HEADER
    secret = dev.logical_id(dev.stack.web.origin_secret)
    assert header["HeaderValue"] == {
        "Fn::Join": ["", ["{{resolve:secretsmanager:", {"Ref": secret}, ":SecretString:::}}"]]
    }
    generated = dev.data["Resources"][secret]["Properties"]["GenerateSecretString"]
    assert generated == {"ExcludePunctuation": True, "PasswordLength": 48}
    s3_origin = next(o for o in config["Origins"] if o["Id"] != api["TargetOriginId"])
    assert "OriginCustomHeaders" not in s3_origin
    _, http_api = dev.one("AWS::ApiGatewayV2::Api")
    assert not http_api["Properties"].get("DisableExecuteApiEndpoint")
