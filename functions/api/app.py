"""The FastAPI application. Building it opens no connection: the container is built on the
first request, from settings, and reused after (one per Lambda execution environment)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Awaitable, Callable

from aws_lambda_powertools import Logger
from aws_lambda_powertools import Metrics as PowertoolsMetrics
from fastapi import FastAPI, Request, Response
from openagents import composition
from openagents.composition import Container
from openagents.observability import NAMESPACE, PowertoolsMetricsSink
from openagents.settings import Settings

from functions.api import errors
from functions.api.hosts import HostGuard
from functions.api.limits import BodyLimit
from functions.api.routes import chat, chats, github, local, sandbox, sessions, shared

SERVICE = "openagents-api"
REQUEST_OVERHEAD_BYTES = 64 * 1024


def _lazy(factory: Callable[[], Container]) -> Callable[[], Container]:
    lock = threading.Lock()
    built: list[Container] = []

    def get() -> Container:
        if not built:
            with lock:
                if not built:
                    built.append(factory())
        return built[0]

    return get


def create_app(
    settings: Callable[[], Settings] = Settings,
    logger: Logger | None = None,
) -> FastAPI:
    logger = logger or Logger(service=SERVICE)
    metrics = PowertoolsMetrics(namespace=NAMESPACE, service=SERVICE)
    app = FastAPI(
        title="Open Agents on AWS",
        version="0.1.0",
        description="Session control plane: sessions, chats, messages and sandboxes.",
    )
    app.state.container = _lazy(
        lambda: composition.build(settings(), PowertoolsMetricsSink(metrics))
    )
    errors.install(app)
    app.include_router(sessions.router)
    app.include_router(chats.router)
    app.include_router(sandbox.router)
    app.include_router(local.router)
    app.include_router(github.router)
    app.include_router(chat.router)
    app.include_router(shared.router)

    @app.middleware("http")
    async def observe(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        event = request.scope.get("aws.event") or {}
        correlation_id = (
            request.headers.get("x-correlation-id")
            or event.get("requestContext", {}).get("requestId")
            or str(uuid.uuid4())
        )
        logger.set_correlation_id(correlation_id)
        response = await call_next(request)
        response.headers["x-correlation-id"] = correlation_id
        logger.info(
            "request",
            extra={
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
            },
        )
        if metrics.metric_set:
            metrics.flush_metrics()
        return response

    app.add_middleware(
        BodyLimit,
        limit=lambda: app.state.container().settings.max_message_bytes + REQUEST_OVERHEAD_BYTES,
    )
    # outermost: a foreign Host (DNS rebinding) is refused before anything reads the request
    app.add_middleware(HostGuard, settings=lambda: app.state.container().settings)

    @app.get("/api/health", tags=["ops"])
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
