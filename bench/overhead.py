"""API overhead: ``GET /api/sandbox/status`` through the Lambda handler (Mangum, AWS mode, the
deployed entry point ``functions.api.handler.lambda_handler``) and through the local server
(uvicorn over loopback HTTP, local mode), against a raw boto3 GetItem of the same item on the
same moto server. The three are interleaved request by request, so load from elsewhere on the
machine hits them alike; the ratio to the raw GetItem is the API's own cost."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.common import environment, fresh_settings, moto_server, ms, say, scratch, summary


def _raw_get(settings: Any, session_id: str) -> Callable[[], None]:
    import boto3

    client = boto3.client(
        "dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.region
    )
    key = {"pk": {"S": f"S#{session_id}"}, "sk": {"S": "SESSION"}}

    def call() -> None:
        if "Item" not in client.get_item(TableName=settings.table_name, Key=key):
            raise RuntimeError("the session item is missing")

    return call


def _aws_environment(settings: Any) -> dict[str, str]:
    """The deployed handler reads its settings from the environment (AWS mode)."""
    return {
        "OPENAGENTS_MODE": "aws",
        "OPENAGENTS_TABLE_NAME": settings.table_name,
        "OPENAGENTS_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint,
        "OPENAGENTS_ARTIFACT_BUCKET": "unused",
        "OPENAGENTS_PROVISION_ON_CREATE": "false",
        "OPENAGENTS_HOME": str(settings.home),
    }


def _lambda(session_id: str) -> Callable[[], None]:
    from functions.api.handler import lambda_handler
    from tests.support import LambdaContext, apigw_event

    claims = {"sub": "alice", "username": "alice"}

    def call() -> None:
        event = apigw_event(
            "GET", "/api/sandbox/status", claims=claims, query={"sessionId": session_id}
        )
        response = lambda_handler(event, LambdaContext())
        if response["statusCode"] != 200:
            raise RuntimeError(f"lambda answered {response}")

    return call


def _http(client: Any, token: str, session_id: str) -> Callable[[], None]:
    headers = {"authorization": f"Bearer {token}"}
    params = {"sessionId": session_id}

    def call() -> None:
        response = client.get("/api/sandbox/status", params=params, headers=headers)
        if response.status_code != 200:
            raise RuntimeError(f"local server answered {response.status_code}")

    return call


def run(args: Any) -> dict[str, Any]:
    import httpx
    from openagents.composition import build
    from openagents.domain.identity import Identity

    from tests.support import USER_AGENT, HttpApi, local_server

    with moto_server() as moto, scratch("overhead") as home:
        settings = fresh_settings(moto.endpoint, home, store="dynamodb")  # the item GetItem reads
        container = build(settings, _NoMetrics())
        session, _ = container.sessions.create(Identity(user_id="alice", username="alice"), _new())
        with environment(**_aws_environment(settings)), local_server(settings) as base_url:
            token = HttpApi(settings, base_url).token("alice")
            client = httpx.Client(base_url=base_url, headers={"user-agent": USER_AGENT})
            paths = {
                "raw GetItem": _raw_get(settings, session.id),
                "Lambda handler": _lambda(session.id),
                "local server": _http(client, token, session.id),
            }
            timings: dict[str, list[float]] = {name: [] for name in paths}
            say(f"overhead: {args.samples} requests per path")
            for round_ in range(args.samples + 30):
                for name, call in paths.items():
                    began = time.perf_counter()
                    call()
                    if round_ >= 30:  # the first rounds warm caches and connections
                        timings[name].append(time.perf_counter() - began)
            client.close()
    stats = {name: {k: (ms(v) if k != "n" else v) for k, v in summary(values).items()}
             for name, values in timings.items()}  # fmt: skip
    raw = stats["raw GetItem"]
    return {
        "milliseconds": stats,
        "ratios": {
            name: {"p50": round(s["p50"] / raw["p50"], 2), "p99": round(s["p99"] / raw["p99"], 2)}
            for name, s in stats.items()
            if name != "raw GetItem"
        },
    }


def _new() -> Any:
    from openagents.services.sessions import NewSession

    return NewSession(title="overhead")


class _NoMetrics:
    def count(self, name: str, value: int = 1) -> None:
        pass


def rows(result: dict[str, Any]) -> list[list[str]]:
    table = []
    for name, s in result["milliseconds"].items():
        ratio = result["ratios"].get(name)
        times = f"p50 {s['p50']:.2f} ms, p99 {s['p99']:.2f} ms"
        detail = f"{ratio['p50']}x / {ratio['p99']}x the raw GetItem" if ratio else "baseline"
        table.append([f"overhead: status via {name}", times, detail])
    return table
