"""Every API request carries a correlation id — the caller's ``x-correlation-id``, else API
Gateway's request id, else a new one — on its JSON log line and echoed on the response, from
pure ASGI middleware (``functions/api/observe.py``)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from typing import Any

import httpx
from aws_lambda_powertools import Logger
from openagents.settings import Settings

from functions.api.app import create_app
from functions.api.observe import correlation_id_of

UA = {"user-agent": "Mozilla/5.0 (X11; Linux x86_64) test"}


def requests(
    settings: Settings, *calls: tuple[str, dict[str, str]]
) -> tuple[list[httpx.Response], list[dict[str, Any]]]:
    out = io.StringIO()
    logger = Logger(
        service=f"api-{uuid.uuid4().hex[:8]}", logger_handler=logging.StreamHandler(out)
    )
    app = create_app(lambda: settings, logger=logger)

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return [await client.get(path, headers={**UA, **headers}) for path, headers in calls]

    answered = asyncio.run(scenario())
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return answered, [line for line in lines if line.get("message") == "request"]


def test_the_callers_id_is_echoed_and_logged(settings: Settings) -> None:
    (answer,), (line,) = requests(settings, ("/api/health", {"x-correlation-id": "trace-42"}))
    assert answer.status_code == 200
    assert answer.headers["x-correlation-id"] == "trace-42"
    assert (line["correlation_id"], line["method"], line["path"], line["status"]) == (
        "trace-42",
        "GET",
        "/api/health",
        200,
    )


def test_without_one_each_request_gets_its_own(settings: Settings) -> None:
    answers, lines = requests(settings, ("/api/health", {}), ("/api/sessions", {}))
    ids = [answer.headers["x-correlation-id"] for answer in answers]
    assert len(set(ids)) == 2
    assert all(uuid.UUID(value) for value in ids)
    assert [line["correlation_id"] for line in lines] == ids
    assert [line["status"] for line in lines] == [200, 401]  # an error answer is logged too


def test_an_unusable_callers_id_is_replaced(settings: Settings) -> None:
    (answer,), (line,) = requests(settings, ("/api/health", {"x-correlation-id": "x" * 201}))
    assert answer.headers["x-correlation-id"] != "x" * 201
    assert line["correlation_id"] == answer.headers["x-correlation-id"]


def test_api_gateways_request_id_when_the_caller_gives_none() -> None:
    event = {"requestContext": {"requestId": "apigw-7"}}
    assert correlation_id_of({"headers": [], "aws.event": event}) == "apigw-7"
    given = [(b"x-correlation-id", b"mine")]
    assert correlation_id_of({"headers": given, "aws.event": event}) == "mine"
