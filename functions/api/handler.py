"""Lambda entry point: API Gateway HTTP API (payload v2) -> Mangum -> FastAPI."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum
from openagents.observability import traced

from functions.api.app import SERVICE, create_app

logger = Logger(service=SERVICE)
asgi = Mangum(create_app(logger=logger), lifespan="off")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced(SERVICE)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response: dict[str, Any] = asgi(event, context)  # type: ignore[arg-type]
    return response
