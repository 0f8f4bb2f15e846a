"""Who may call the API: bearer tokens (one machine), authorizer claims (AWS), bot checks,
and the guards every request passes (unknown routes, body size)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from openagents.auth.tokens import load_or_create_secret
from openagents.settings import Settings

from tests.support import USER_AGENT, Api, HttpApi, LambdaApi, LambdaContext, Reply, apigw_event

SESSIONS = "/api/sessions"
TWO_MIB = 2 * 1024 * 1024


class ClaimsLambdaApi(LambdaApi):
    """AWS mode with whatever claims the authorizer would pass (or none)."""

    def invoke(
        self,
        method: str,
        path: str,
        claims: dict[str, Any] | None,
        *,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        raw = None if body is None else json.dumps(body).encode()
        hdrs = dict(headers or {})
        if raw is not None:
            hdrs.setdefault("content-type", "application/json")
        event = apigw_event(method, path, claims=claims, body=raw, headers=hdrs)
        response = self._handler(event, LambdaContext())  # type: ignore[arg-type]
        text = response.get("body") or ""
        if response.get("isBase64Encoded"):
            text = base64.b64decode(text).decode()
        lowered = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
        return Reply(response["statusCode"], lowered, json.loads(text) if text else None)


@pytest.fixture
def lambda_api(settings: Settings) -> ClaimsLambdaApi:
    # Sessions never touch the artifact bucket; AWS mode only needs one to be named.
    return ClaimsLambdaApi(settings.model_copy(update={"artifact_bucket": "unused"}))


def claims_for(settings: Settings, user: str = "alice", **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "sub": user,
        "username": user,
        "iss": settings.jwt_issuer,
        "aud": settings.jwt_audience,
        "iat": now,
        "exp": now + 600,
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def real_secret(http_api: HttpApi) -> str:
    return load_or_create_secret(http_api.settings.jwt_secret_path)


def with_token(http_api: HttpApi, token: str, path: str = SESSIONS) -> Reply:
    return http_api.get(path, user=None, headers={"authorization": f"Bearer {token}"})


def assert_unauthenticated(reply: Reply) -> None:
    assert reply.status == 401, reply.body
    assert reply.error["code"] == "unauthenticated"
    assert reply.headers.get("www-authenticate") == "Bearer"
    assert "sessions" not in reply.body


def assert_denied(reply: Reply) -> None:
    assert reply.status == 403, reply.body
    assert reply.error == {"error": "Access denied", "code": "access_denied", "field": None}


def session_total(api: Api, user: str = "alice") -> int:
    reply = api.get(SESSIONS, user=user)
    assert reply.status == 200, reply.body
    return len(reply.body["sessions"])


# ------------------------------------------------------------ authentication


ROUTES: list[tuple[str, str, Any]] = [
    ("GET", SESSIONS, None),
    ("POST", SESSIONS, {"title": "x"}),
    ("GET", f"{SESSIONS}/abc", None),
    ("PATCH", f"{SESSIONS}/abc", {"title": "x"}),
    ("DELETE", f"{SESSIONS}/abc", None),
    ("GET", f"{SESSIONS}/abc/events", None),
    ("GET", f"{SESSIONS}/abc/chats", None),
    ("POST", f"{SESSIONS}/abc/chats", {}),
    ("GET", "/api/user/preferences", None),
    ("PUT", "/api/user/preferences", {"autoCommitPush": True}),
]


def test_every_session_route_needs_a_caller(api: Api) -> None:
    for method, path, body in ROUTES:
        reply = api.request(method, path, user=None, json_body=body)
        assert reply.status == 401, (method, path, reply.body)
        assert_unauthenticated(reply)

    assert session_total(api) == 0


def test_missing_or_non_bearer_authorization_is_401(http_api: HttpApi) -> None:
    token = http_api.token("alice")
    for header in (None, "", f"Basic {token}", "Basic YWxpY2U6cHc=", "Bearer", "Bearer x y", token):
        headers = {} if header is None else {"authorization": header}
        reply = http_api.get(SESSIONS, user=None, headers=headers)
        assert_unauthenticated(reply)
    assert with_token(http_api, token).status == 200


def test_tokens_that_do_not_verify_are_401(http_api: HttpApi) -> None:
    settings = http_api.settings
    secret = real_secret(http_api)
    good = claims_for(settings)
    forged: dict[str, str] = {
        "garbage": "not-a-token",
        "three dots": "a.b.c",
        "other secret": jwt.encode(good, "another-secret-" * 4, algorithm="HS256"),
        "alg none": jwt.encode(good, "", algorithm="none"),
        "other algorithm": jwt.encode(good, secret, algorithm="HS512"),
        "wrong audience": jwt.encode(claims_for(settings, aud="someone-else"), secret),
        "wrong issuer": jwt.encode(claims_for(settings, iss="https://evil.example"), secret),
        "no audience": jwt.encode(claims_for(settings, aud=None), secret),
        "no subject": jwt.encode(claims_for(settings, sub=None), secret),
        "empty subject": jwt.encode(claims_for(settings, sub=""), secret),
        "no expiry": jwt.encode(claims_for(settings, exp=None), secret),
        "not yet valid": jwt.encode(claims_for(settings, nbf=int(time.time()) + 600), secret),
    }
    accepted = {label: with_token(http_api, token).status for label, token in forged.items()}

    assert accepted == dict.fromkeys(forged, 401)
    for token in forged.values():
        assert_unauthenticated(with_token(http_api, token))
    # the same claims signed with the real secret are fine
    assert with_token(http_api, jwt.encode(good, secret)).status == 200


def test_expired_token_says_so(http_api: HttpApi) -> None:
    past = int(time.time()) - 120
    claims = claims_for(http_api.settings, iat=past - 600, exp=past)
    token = jwt.encode(claims, real_secret(http_api), algorithm="HS256")

    reply = with_token(http_api, token)

    assert_unauthenticated(reply)
    assert reply.error["error"] == "Token expired"
    created = http_api.post(
        SESSIONS, {"title": "late"}, user=None, headers={"authorization": f"Bearer {token}"}
    )
    assert created.status == 401
    assert session_total(http_api) == 0


def test_token_identity_is_the_subject(http_api: HttpApi) -> None:
    secret = real_secret(http_api)
    token = jwt.encode(claims_for(http_api.settings, user="carol", username="someone"), secret)

    created = http_api.post(
        SESSIONS, {"title": "mine"}, user=None, headers={"authorization": f"Bearer {token}"}
    )

    assert created.status == 201, created.body
    assert session_total(http_api, user="carol") == 1
    assert session_total(http_api, user="someone") == 0


def test_aws_mode_needs_authorizer_claims_with_a_subject(lambda_api: ClaimsLambdaApi) -> None:
    for claims in (None, {}, {"username": "alice"}, {"sub": ""}, {"sub": 42}):
        for method, path, body in (("GET", SESSIONS, None), ("POST", SESSIONS, {"title": "x"})):
            reply = lambda_api.invoke(method, path, claims, body=body)
            assert_unauthenticated(reply)

    assert lambda_api.invoke("GET", SESSIONS, {"sub": "alice"}).status == 200
    assert session_total(lambda_api) == 0


# ---------------------------------------------------------------- bot check


AUTOMATION_AGENTS = [
    "",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 HeadlessChrome/120.0.0.0",
    "Mozilla/5.0 Playwright/1.45",
    "python-selenium webdriver",
]


def test_automation_user_agents_cannot_create_sessions(http_api: HttpApi) -> None:
    for agent in AUTOMATION_AGENTS:
        reply = http_api.post(SESSIONS, {"title": "bot"}, headers={"user-agent": agent})
        assert_denied(reply)

    assert session_total(http_api) == 0
    assert http_api.post(SESSIONS, {"title": "human"}).status == 201


def test_bot_check_runs_after_authentication(http_api: HttpApi) -> None:
    reply = http_api.post(SESSIONS, {}, user=None, headers={"user-agent": "HeadlessChrome"})

    assert_unauthenticated(reply)


def test_machine_tokens_skip_the_user_agent_check(http_api: HttpApi) -> None:
    token = http_api.tokens.mint("robot", ttl_seconds=600, machine=True)
    headers = {"authorization": f"Bearer {token}", "user-agent": "HeadlessChrome/120"}

    reply = http_api.post(SESSIONS, {"title": "automation"}, user=None, headers=headers)

    assert reply.status == 201, reply.body
    assert reply.body["session"]["title"] == "automation"
    assert session_total(http_api, user="robot") == 1


def test_aws_mode_refuses_requests_labelled_by_waf_bot_control(
    lambda_api: ClaimsLambdaApi,
) -> None:
    claims = {"sub": "alice", "username": "alice"}
    for label in ("automated_browser", "http_library", "scraping_framework"):
        labelled = {"x-amzn-waf-bot-category": label}
        assert_denied(lambda_api.invoke("POST", SESSIONS, claims, body={}, headers=labelled))
        denied = lambda_api.post(SESSIONS, {}, headers=labelled)
        assert_denied(denied)
    assert session_total(lambda_api) == 0

    # a headless browser without a WAF label is not judged by its User-Agent in AWS mode
    unlabelled = lambda_api.post(SESSIONS, {"title": "ok"}, headers={"user-agent": "Playwright"})
    assert unlabelled.status == 201, unlabelled.body
    # machine clients (client-credentials) are not refused for the label
    machine = {"sub": "robot", "gty": "client-credentials"}
    labelled = {"x-amzn-waf-bot-category": "automated_browser"}
    reply = lambda_api.invoke("POST", SESSIONS, machine, body={"title": "m"}, headers=labelled)
    assert reply.status == 201, reply.body


# ------------------------------------------------------ routes and body size


def test_health_needs_no_caller(api: Api) -> None:
    reply = api.get("/api/health", user=None)

    assert reply.status == 200
    assert reply.body == {"status": "ok"}


def test_unknown_routes_and_methods_answer_json_errors(api: Api) -> None:
    for path in ("/api/nope", "/api/sessions/abc/nope", "/nope"):
        reply = api.get(path)
        assert reply.status == 404, (path, reply.body)
        assert reply.error["code"] == "not_found"
        assert reply.error["error"]
    wrong_method = api.put(SESSIONS, {})
    assert wrong_method.status == 405, wrong_method.body
    assert wrong_method.error["code"] == "method_not_allowed"
    assert session_total(api) == 0


def test_oversized_bodies_are_refused_before_anything_is_written(
    api: Api, settings: Settings
) -> None:
    limit = settings.max_message_bytes + 64 * 1024
    body = json.dumps({"title": "x" * TWO_MIB}).encode()
    assert len(body) > limit
    # API Gateway passes the request's Content-Length along; httpx sets it itself
    headers = {"content-length": str(len(body))} if api.transport == "lambda" else None

    reply = api.request("POST", SESSIONS, raw_body=body, headers=headers)

    assert reply.status == 413, reply.body
    assert reply.error["code"] == "payload_too_large"
    assert session_total(api) == 0


def test_chunked_oversized_body_is_refused_too(http_api: HttpApi) -> None:
    # No Content-Length: the body arrives in chunks and must still be bounded.
    body = json.dumps({"title": "x" * TWO_MIB}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    response = http_api.client.post(
        SESSIONS,
        content=chunks(),
        headers={
            "authorization": f"Bearer {http_api.token('alice')}",
            "content-type": "application/json",
            "user-agent": USER_AGENT,
        },
    )

    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert response.status_code == 413, response.text
    assert response.json()["code"] == "payload_too_large"
    assert session_total(http_api) == 0
