"""Api: the HTTP API (JWT authorizer on every route but the public ones), its stage (throttling,
access logs) and the API Lambda (FastAPI via Mangum) with a least-privilege role."""

from __future__ import annotations

import json

import jsii
from aws_cdk import Aws, Duration, Fn, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.data import MESSAGES_PREFIX, Data
from infra.constructs.function import Layers, ServiceFunction, removal, retention
from infra.nag import acknowledge

SERVICE = "openagents-api"  # functions.api.app.SERVICE
METRICS_NAMESPACE = "OpenAgents"  # openagents.observability.NAMESPACE
PROXY_PATH = "/api/{proxy+}"
# Routes that carry no JWT. The GitHub webhook (HMAC-checked by the app) joins this list when
# its code lands: ("POST", "/api/github/webhook").
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (("GET", "/api/health"),)
THROTTLE_RATE = 50  # requests per second, steady state, for the whole stage
THROTTLE_BURST = 100

# The DynamoDB actions the store performs (tests/infra/test_least_privilege.py proves the list
# is exactly what an API flow uses). TransactWriteItems is authorised per item action.
TABLE_ACTIONS = (
    "dynamodb:BatchWriteItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
)
INDEX_ACTIONS = ("dynamodb:Query",)
MESSAGE_BODY_ACTIONS = ("s3:DeleteObject", "s3:GetObject", "s3:PutObject")

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
        data: Data,
        layers: Layers,
        authorizer: apigwv2.IHttpRouteAuthorizer,
    ) -> None:
        super().__init__(scope, id)
        self.function = self._build_function(config, data, layers)
        self.http_api = self._build_http_api(config)
        self.stage = self._build_stage(config)
        self._add_routes(authorizer)

    # ------------------------------------------------------------------ function

    def _build_function(self, config: StageConfig, data: Data, layers: Layers) -> ServiceFunction:
        table_arn = data.table.table_arn
        statements = [
            iam.PolicyStatement(
                sid="TableItems", actions=list(TABLE_ACTIONS), resources=[table_arn]
            ),
            iam.PolicyStatement(
                sid="ListIndexes",
                actions=list(INDEX_ACTIONS),
                resources=[f"{table_arn}/index/{index.name}" for index in data.indexes],
            ),
            iam.PolicyStatement(
                sid="MessageBodies",
                actions=list(MESSAGE_BODY_ACTIONS),
                resources=[data.artifacts.arn_for_objects(f"{MESSAGES_PREFIX}*")],
            ),
        ]
        function = ServiceFunction(
            self,
            "Handler",
            config=config,
            name="api",
            layers=layers,
            memory_mb=1024,  # more memory is more CPU: FastAPI's cold import is CPU-bound
            timeout=Duration.seconds(29),  # API Gateway gives up at 30 s
            environment={
                "OPENAGENTS_MODE": "aws",
                "OPENAGENTS_REGION": Aws.REGION,
                "OPENAGENTS_TABLE_NAME": data.table.table_name,
                "OPENAGENTS_ARTIFACT_BUCKET": data.artifacts.bucket_name,
                "POWERTOOLS_SERVICE_NAME": SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                # no provisioning state machine is deployed yet (the Workflows construct will
                # set OPENAGENTS_STATE_MACHINES and turn this back on)
                "OPENAGENTS_PROVISION_ON_CREATE": "false",
            },
            statements=statements,
            description="Open Agents API (FastAPI via Mangum)",
        )
        acknowledge(
            function.role,
            "IAM5",
            "Large message bodies are objects under messages/<chatId>/<messageId>/...: "
            "the prefix is the narrowest resource",
            f"Resource::<{_logical(data.artifacts)}.Arn>/{MESSAGES_PREFIX}*",
        )
        acknowledge(
            function.function,
            "L1",
            "Pinned to Python 3.12: the deps layer is built for cp312/arm64 "
            "(infra/build.py) and the bytecode is compiled by 3.12",
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
                f"{method} {path} is public by design (health probe / HMAC-signed webhook)",
            )

    # ------------------------------------------------------------------ outputs

    @property
    def url(self) -> str:
        return self.http_api.api_endpoint

    @property
    def domain_name(self) -> str:
        """``<id>.execute-api.<region>.amazonaws.com`` for a CloudFront origin."""
        return Fn.select(2, Fn.split("/", self.http_api.api_endpoint))


def _logical(construct: Construct) -> str:
    child = construct.node.default_child
    assert child is not None
    return Stack.of(construct).get_logical_id(child)  # type: ignore[arg-type]
