"""The FastAPI application. Building it opens no connection: the container is built on the
first request, from settings, and reused after (one per Lambda execution environment)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from aws_lambda_powertools import Logger
from aws_lambda_powertools import Metrics as PowertoolsMetrics
from fastapi import APIRouter, Depends, FastAPI
from openagents import composition
from openagents.lazy import Once
from openagents.observability import NAMESPACE, PowertoolsMetricsSink
from openagents.services.caps import Caps
from openagents.settings import Settings
from pydantic.warnings import UnsupportedFieldAttributeWarning

from functions.api import errors
from functions.api.hosts import HostGuard
from functions.api.limits import BodyLimit
from functions.api.longpoll import long_polls
from functions.api.observe import Observe
from functions.api.preview import PreviewProxy
from functions.api.preview_pool import TunnelPool
from functions.api.routes import (
    attachments,
    chat,
    chats,
    git,
    github,
    local,
    previews,
    repositories,
    sandbox,
    sessions,
    shared,
    skills,
    usage,
)
from functions.api.strict_query import known_query

SERVICE = "openagents-api"
REQUEST_OVERHEAD_BYTES = 64 * 1024


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes as the app's own. ``include_router`` (FastAPI 0.16x) would keep the
    router apart and, on the first request, analyse each of its routes a second time (their
    dependencies and every response model): a third of the API's cold start."""
    app.router.routes.extend(router.routes)


def _poll_caps(settings: Settings) -> Caps:
    return Caps(
        per_scope=settings.long_poll_max_per_chat,
        per_user=settings.long_poll_max_per_user,
        total=settings.long_poll_max_total,
    )


def create_app(
    settings: Callable[[], Settings] = Settings,
    logger: Logger | None = None,
) -> FastAPI:
    logger = logger or Logger(service=SERVICE)
    # FastAPI builds its request-body adapters with this warning off; the schemas' defer_build
    # moves that build to the first request, outside FastAPI's filter (functions/api/schemas.py)
    warnings.filterwarnings("ignore", category=UnsupportedFieldAttributeWarning)
    metrics = PowertoolsMetrics(namespace=NAMESPACE, service=SERVICE)
    app = FastAPI(
        title="Open Agents on AWS",
        version="0.1.0",
        description="Session control plane: sessions, chats, messages and sandboxes.",
        dependencies=[Depends(known_query)],
    )
    # Settings alone answer the middleware (and /api/health); the container, with the store
    # adapter (PynamoDB and botocore on AWS), is built by the first request that needs it.
    app.state.settings = Once(settings)
    app.state.container = Once(
        lambda: composition.build(app.state.settings(), PowertoolsMetricsSink(metrics))
    )
    app.state.long_polls = long_polls(lambda: _poll_caps(app.state.settings()))
    errors.install(app)
    routers = (sessions, chats, sandbox, previews, local, github, chat, shared, git)
    for module in (*routers, repositories, skills, usage):
        _add_routes(app, module.router)
    _add_routes(app, attachments.router)

    app.add_middleware(Observe, logger=logger, metrics=metrics)
    app.add_middleware(
        BodyLimit,
        limit=lambda: app.state.settings().max_message_bytes + REQUEST_OVERHEAD_BYTES,
        route_limit=attachments.upload_limit,  # an upload's bytes: their own cap
    )
    # outermost: a foreign Host (DNS rebinding) is refused before anything reads the request
    app.add_middleware(HostGuard, settings=app.state.settings)
    # outside it: a preview host (`<port>-<session>.localhost`) is the previews', not the API's
    # (its idle tunnels on app.state: made now, used on the server's loop from the first preview)
    app.state.preview_tunnels = TunnelPool()
    app.add_middleware(PreviewProxy, container=app.state.container, pool=app.state.preview_tunnels)

    @app.get("/api/health", tags=["ops"])
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
