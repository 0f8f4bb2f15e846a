"""Api: the Lambda's shape, the routes' authorizer, the stage, CORS and the user pool."""

from __future__ import annotations

import re
from typing import Any

from aws_cdk.assertions import Match
from fastapi.routing import APIRoute

from functions.api.routes import shared
from infra.constructs.api import PROXY_PATH, PUBLIC_ROUTES
from tests.infra.conftest import GITHUB_TOKEN, SPA_ORIGIN, Synth

PUBLIC_ROUTE_KEYS = {f"{method} {path}" for method, path in PUBLIC_ROUTES}


API_HANDLER = "functions.api.handler.lambda_handler"


def _function(synth: Synth) -> dict[str, Any]:
    return synth.function(API_HANDLER)[1]


def test_api_function_runtime_and_shape(dev: Synth) -> None:
    props = _function(dev)
    assert props["Handler"] == "functions.api.handler.lambda_handler"
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert props["MemorySize"] == 1024
    assert props["Timeout"] == 29
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    assert len(props["Layers"]) == 2
    log_group = dev.logical_id(dev.stack.api.function.log_group)
    assert props["LoggingConfig"]["LogGroup"] == {"Ref": log_group}


def test_api_function_environment(dev: Synth) -> None:
    env = _function(dev)["Environment"]["Variables"]
    sandbox = dev.stack.sandbox
    assert env["OPENAGENTS_MODE"] == "aws"
    assert env["OPENAGENTS_REGION"] == {"Ref": "AWS::Region"}
    assert env["OPENAGENTS_TABLE_NAME"] == {"Ref": dev.logical_id(dev.stack.data.table)}
    assert env["OPENAGENTS_ARTIFACT_BUCKET"] == {"Ref": dev.logical_id(dev.stack.data.artifacts)}
    assert env["OPENAGENTS_PROVISION_ON_CREATE"] == "true"
    assert env["OPENAGENTS_SANDBOX_DRIVER"] == "fargate"
    assert env["OPENAGENTS_SANDBOX_TOKEN_SECRET_ARN"] == {
        "Ref": dev.logical_id(sandbox.token_secret)
    }
    assert env["OPENAGENTS_FARGATE_CLUSTER"] == {"Ref": dev.logical_id(sandbox.cluster)}
    assert env["OPENAGENTS_FARGATE_TASK_DEFINITION"] == {
        "Ref": dev.logical_id(sandbox.task_definition)
    }
    assert env["OPENAGENTS_FARGATE_EBS_ROLE_ARN"] == {
        "Fn::GetAtt": [dev.logical_id(sandbox.infrastructure_role), "Arn"]
    }
    assert env["OPENAGENTS_FARGATE_STORAGE"] == "ebs"
    assert env["POWERTOOLS_SERVICE_NAME"] == "openagents-api"
    assert "OPENAGENTS_STEPFUNCTIONS_ENDPOINT" not in env  # the SDK's default in AWS
    assert "OPENAGENTS_STATE_MACHINES" in env  # tests/infra/test_workflows.py resolves it


def test_log_groups_have_retention(dev: Synth, prod: Synth) -> None:
    for synth, days in ((dev, 30), (prod, 365)):
        groups = synth.resources("AWS::Logs::LogGroup")
        assert groups
        for group in groups.values():
            assert group["Properties"]["RetentionInDays"] == days


def test_authorizer_on_every_route_but_the_public_ones(dev: Synth) -> None:
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in dev.resources("AWS::ApiGatewayV2::Route").values()
    }
    assert f"ANY {PROXY_PATH}" in routes
    assert "GET /api/health" in PUBLIC_ROUTE_KEYS
    assert "POST /api/github/webhook" in PUBLIC_ROUTE_KEYS  # HMAC-checked by the app
    authorizer = dev.one("AWS::ApiGatewayV2::Authorizer")[0]
    for key, props in routes.items():
        if key in PUBLIC_ROUTE_KEYS:
            assert props["AuthorizationType"] == "NONE", key
            assert "AuthorizerId" not in props
        else:
            assert props["AuthorizationType"] == "JWT", key
            assert props["AuthorizerId"] == {"Ref": authorizer}, key
    assert set(routes) - PUBLIC_ROUTE_KEYS, "at least one protected route"
    assert not any(k.startswith("$default") for k in routes), "no unauthenticated catch-all"


def test_the_apps_public_share_routes_skip_the_authorizer(dev: Synth) -> None:
    """Every route of the app's public router is declared without the JWT authorizer (with
    API Gateway's parameter syntax), so a share link opens without signing in."""
    public = {
        f"{method} {re.sub(r'[{]share_id[}]', '{shareId}', route.path)}"
        for route in shared.router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }
    assert len(public) == 3
    assert public <= PUBLIC_ROUTE_KEYS
    keys = {r["Properties"]["RouteKey"] for r in dev.resources("AWS::ApiGatewayV2::Route").values()}
    assert public <= keys


def test_jwt_authorizer_trusts_the_created_user_pool(dev: Synth) -> None:
    pool = dev.logical_id(dev.stack.identity.user_pool)
    client = dev.logical_id(dev.stack.identity.client)
    dev.template.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {
            "AuthorizerType": "JWT",
            "IdentitySource": ["$request.header.Authorization"],
            "JwtConfiguration": {
                "Audience": [{"Ref": client}],
                "Issuer": {
                    "Fn::Join": [
                        "",
                        [
                            "https://cognito-idp.",
                            {"Ref": "AWS::Region"},
                            ".amazonaws.com/",
                            {"Ref": pool},
                        ],
                    ]
                },
            },
        },
    )


def test_spa_client_is_public_with_code_flow(dev: Synth) -> None:
    dev.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {
            "GenerateSecret": False,
            "AllowedOAuthFlows": ["code"],
            "AllowedOAuthFlowsUserPoolClient": True,
            "AllowedOAuthScopes": ["openid", "email", "profile"],
            "CallbackURLs": Match.array_with([f"{SPA_ORIGIN}/"]),
        },
    )
    dev.template.has_resource_properties(
        "AWS::Cognito::UserPool",
        {
            "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True},
            "Policies": {"PasswordPolicy": Match.object_like({"MinimumLength": 12})},
        },
    )


def test_stage_throttles_and_logs_access(dev: Synth) -> None:
    _, stage = dev.one("AWS::ApiGatewayV2::Stage")
    props = stage["Properties"]
    assert props["StageName"] == "$default"
    assert props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"] == {"ThrottlingBurstLimit": 100, "ThrottlingRateLimit": 50}
    logs = dev.logical_id(dev.stack.api.access_logs)
    assert props["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": [logs, "Arn"]}
    assert "$context.requestId" in props["AccessLogSettings"]["Format"]


def test_cors_allows_only_the_spa_origins(dev: Synth, prod: Synth) -> None:
    _, api = dev.one("AWS::ApiGatewayV2::Api")
    cors = api["Properties"]["CorsConfiguration"]
    assert cors["AllowOrigins"] == [SPA_ORIGIN]
    assert "authorization" in cors["AllowHeaders"]
    assert cors.get("AllowCredentials") in (None, False)
    # same-origin through CloudFront needs no CORS: without spaOrigins there is none
    _, api = prod.one("AWS::ApiGatewayV2::Api")
    assert "CorsConfiguration" not in api["Properties"]


def test_api_reads_the_origin_and_github_secrets(dev: Synth, ext: Synth) -> None:
    _, props = dev.function("functions.api.handler.lambda_handler")
    env = props["Environment"]["Variables"]
    # CloudFront's header value is the secret the API compares against
    assert env["OPENAGENTS_ORIGIN_SECRET_ARN"] == {
        "Ref": dev.logical_id(dev.stack.web.origin_secret)
    }
    github = dev.stack.github
    assert env["OPENAGENTS_GITHUB_WEBHOOK_SECRET_ARN"] == {
        "Ref": dev.logical_id(github.webhook_secret)
    }
    assert env["OPENAGENTS_GITHUB_TOKEN_SECRET_ARN"] == {"Ref": dev.logical_id(github.token_secret)}
    # a stage with an existing token secret creates none and uses that one
    _, ext_props = ext.function("functions.api.handler.lambda_handler")
    assert ext_props["Environment"]["Variables"]["OPENAGENTS_GITHUB_TOKEN_SECRET_ARN"] == (
        GITHUB_TOKEN
    )
    descriptions = [
        r["Properties"].get("Description", "")
        for r in ext.resources("AWS::SecretsManager::Secret").values()
    ]
    assert not any("GitHub token" in d for d in descriptions)
    assert any("GitHub webhook" in d for d in descriptions)
    # the workflow functions read none of them, but the GitHub token: the archiver (archiving
    # refreshes the PR, the auto-archive schedule included), the provisioner (private clones)
    # and the agent turn (auto-commit / auto-PR after a natural finish)
    for synth in (dev, ext):
        for logical, function in synth.resources("AWS::Lambda::Function").items():
            handler = function["Properties"].get("Handler", "")
            if handler.startswith("functions.api."):
                continue
            variables = function["Properties"].get("Environment", {}).get("Variables", {})
            reads_token = any(name in handler for name in ("archiver", "provisioner", "agent"))
            allowed = {"OPENAGENTS_GITHUB_TOKEN_SECRET_ARN"} if reads_token else set()
            read = {k for k in variables if "GITHUB" in k or "ORIGIN_SECRET" in k}
            assert read == allowed, logical


def test_outputs(dev: Synth) -> None:
    for key in ("AppUrl", "ApiUrl", "TableName", "ArtifactBucketName", "WebBucketName",
                "DistributionId", "UserPoolId", "UserPoolClientId", "HostedUiUrl",
                "SandboxClusterName", "ProvisioningStateMachineArn", "GitHubWebhookUrl",
                "GitHubWebhookSecretArn", "GitHubTokenSecretArn",
                "RuleDeadLettersQueueUrl"):  # fmt: skip
        dev.template.has_output(key, {"Value": Match.any_value()})
