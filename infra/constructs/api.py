"""Api: the HTTP API (JWT authorizer on every route but the public ones), its stage (throttling,
access logs) and the API Lambda (FastAPI via Mangum) with a least-privilege role. The Lambda
runs in the control-plane network (it calls sandboxd on the sandboxes' private IPs), starts the
workflows and reads the sandbox token key."""

from __future__ import annotations

import json

import jsii
from aws_cdk import Duration, Fn
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import nag
from infra.config import StageConfig
from infra.constructs.control_plane import GITHUB_CREDENTIALS, ControlPlane, Needs
from infra.constructs.data import DIFFS_PREFIX, MESSAGES_PREFIX
from infra.constructs.function import Layers, ServiceFunction, removal, retention
from infra.nag import acknowledge

SERVICE = "openagents-api"  # functions.api.app.SERVICE
PROXY_PATH = "/api/{proxy+}"
# Routes that carry no JWT: the health probe, the GitHub webhook (the app checks GitHub's HMAC
# signature with the webhook secret) and a shared chat's read-only transcript (the unguessable
# share id is the credential; the app keeps its bot check). All still need CloudFront's origin
# header.
WEBHOOK_ROUTE = ("POST", "/api/github/webhook")
SHARED_ROUTES: tuple[tuple[str, str], ...] = tuple(
    ("GET", f"/api/shared/{{shareId}}{suffix}") for suffix in ("", "/markdown", "/status")
)
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/api/health"),
    WEBHOOK_ROUTE,
    *SHARED_ROUTES,
)
THROTTLE_RATE = 50  # requests per second, steady state, for the whole stage
THROTTLE_BURST = 100

# What the API's code does (tests/infra/test_least_privilege.py drives every route and proves
# the list is exactly what it uses). TransactWriteItems is authorised per item action.
NEEDS = Needs(
    table=(
        "dynamodb:BatchGetItem",  # the session's runs (GET /api/sessions/{id}/runs)
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
    ),
    indexes={
        "byPr": ("dynamodb:Query",),  # the GitHub webhook finds a PR's sessions
        "byUser": ("dynamodb:Query",),
        "byUserStatus": ("dynamodb:Query",),
    },
    message_bodies=("s3:DeleteObject", "s3:GetObject", "s3:PutObject"),
    diffs=("s3:GetObject", "s3:PutObject"),  # GET …/sandbox/diff caches it, …/diff/cached reads it
    # uploads and reads; a session's delete lists and deletes its files
    attachments=("s3:DeleteObject", "s3:GetObject", "s3:PutObject"),
    lists_attachments=True,
    # the webhook's HMAC key, the GitHub credentials (PR refresh on archive), CloudFront's header
    secrets=("github-webhook", *GITHUB_CREDENTIALS, "origin"),
    starts=("provisioning", "lifecycle"),  # create/retry/resume; status kicks an overdue loop
    # a sandbox tool call that cannot reach sandboxd checks the task; a session's delete stops
    # its sandbox and drops its snapshot before it answers
    driver=("probe", "stop", "delete_snapshot"),
    token_key=True,  # the sandbox tools call sandboxd with the sandbox's token
)

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "userId": "$context.authorizer.claims.sub",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT))


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        layers: Layers,
        authorizer: apigwv2.IHttpRouteAuthorizer,
        control_plane: ControlPlane,
    ) -> None:
        super().__init__(scope, id)
        self.function = self._build_function(config, layers, control_plane)
        self.http_api = self._build_http_api(config)
        self.stage = self._build_stage(config)
        self._add_routes(authorizer)

    # ------------------------------------------------------------------ function

    def _build_function(
        self, config: StageConfig, layers: Layers, control_plane: ControlPlane
    ) -> ServiceFunction:
        function = ServiceFunction(
            self,
            "Handler",
            config=config,
            name="api",
            layers=layers,
            memory_mb=1024,  # more memory is more CPU: FastAPI's cold import is CPU-bound
            timeout=Duration.seconds(29),  # API Gateway gives up at 30 s
            environment=control_plane.environment(SERVICE, NEEDS),
            statements=control_plane.statements(NEEDS),
            description="Open Agents API (FastAPI via Mangum)",
            network=control_plane.sandbox.network,
            star_reason=control_plane.star_reason(NEEDS),
        )
        control_plane.grant(function, NEEDS)
        acknowledge(
            function.role,
            "IAM5",
            "Large message bodies are objects under messages/<chatId>/<messageId>/...: "
            "the prefix is the narrowest resource",
            nag.resource(self, control_plane.data.artifacts.arn_for_objects(f"{MESSAGES_PREFIX}*")),
        )
        acknowledge(
            function.role,
            "IAM5",
            "The cached diffs are objects diffs/<sessionId>.json: the prefix is the narrowest "
            "resource",
            nag.resource(self, control_plane.data.artifacts.arn_for_objects(f"{DIFFS_PREFIX}*")),
        )
        return function

    # ------------------------------------------------------------------ http api

    def _build_http_api(self, config: StageConfig) -> apigwv2.HttpApi:
        cors = None
        if config.spa_origins:
            cors = apigwv2.CorsPreflightOptions(
                allow_origins=list(config.spa_origins),
                allow_methods=[
                    apigwv2.CorsHttpMethod.GET,
                    apigwv2.CorsHttpMethod.POST,
                    apigwv2.CorsHttpMethod.PUT,
                    apigwv2.CorsHttpMethod.PATCH,
                    apigwv2.CorsHttpMethod.DELETE,
                    apigwv2.CorsHttpMethod.OPTIONS,
                ],
                allow_headers=["authorization", "content-type", "x-correlation-id"],
                expose_headers=["x-correlation-id", "retry-after"],
                max_age=Duration.hours(1),
            )
        return apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=f"openagents-{config.stage}",
            description="Open Agents session control plane",
            cors_preflight=cors,
            create_default_stage=False,
        )

    def _build_stage(self, config: StageConfig) -> apigwv2.HttpStage:
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(config), removal_policy=removal(config)
        )
        return apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=THROTTLE_RATE, burst_limit=THROTTLE_BURST),
            access_log_settings=_AccessLogs(self.access_logs),
        )

    def _add_routes(self, authorizer: apigwv2.IHttpRouteAuthorizer) -> None:
        self.integration = integrations.HttpLambdaIntegration(
            "Lambda",
            self.function.function,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        self.http_api.add_routes(
            path=PROXY_PATH,
            methods=[apigwv2.HttpMethod.ANY],
            integration=self.integration,
            authorizer=authorizer,
        )
        for method, path in PUBLIC_ROUTES:
            self.add_public_route(method, path)

    def add_public_route(self, method: str, path: str) -> None:
        """A route without the JWT authorizer (the app must authenticate it some other way)."""
        routes = self.http_api.add_routes(
            path=path,
            methods=[apigwv2.HttpMethod(method)],
            integration=self.integration,
            authorizer=apigwv2.HttpNoneAuthorizer(),
        )
        for route in routes:
            acknowledge(
                route,
                "APIG4",
                f"{method} {path} is public by design (health probe / HMAC-signed webhook /"
                " share link)",
            )

    # ------------------------------------------------------------------ outputs

    @property
    def url(self) -> str:
        return self.http_api.api_endpoint

    @property
    def domain_name(self) -> str:
        """``<id>.execute-api.<region>.amazonaws.com`` for a CloudFront origin."""
        return Fn.select(2, Fn.split("/", self.http_api.api_endpoint))
