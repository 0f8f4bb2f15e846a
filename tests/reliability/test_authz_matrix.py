"""Every route of the app x every kind of bad caller → 401 (no, malformed, forged, expired,
unsigned or misaddressed token) or 404 (another user), never another user's data, never a 5xx,
and nothing changed. One exception, by FastAPI's design: a body that is not JSON at all is parsed
before authentication and answered 400 ``invalid_json`` (no data, no write).

Routes come from ``app.routes``: a new route is covered the day it is added. Authentication is
a dependency, and FastAPI resolves dependencies before it validates the body, so a bad token is
401 whatever the body. For another user, each route gets a valid body (the ownership check must
be what refuses it); a route this suite does not know yet gets ``{}``, and a 422 from its body
validation is accepted there (validation runs before the handler, so it leaks nothing)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import jwt
import pytest
from fastapi.routing import iter_route_contexts
from openagents.settings import Settings

from functions.api.app import create_app
from tests.support import USER_AGENT, Api, HttpApi, LambdaApi, Reply, local_server

pytestmark = pytest.mark.timeout(120)

# Routes that answer without a caller, on purpose. A new public route fails this suite until
# it is reviewed and added here.
PUBLIC = {
    ("GET", "/api/health"),
    ("POST", "/api/local/token"),  # local mode only (the web app's sign-in); 404 in AWS mode
    ("POST", "/api/github/webhook"),  # authenticated by its HMAC signature instead
    # a shared chat, read-only: the unguessable share id is the credential
    ("GET", "/api/shared/{share_id}"),
    ("GET", "/api/shared/{share_id}/markdown"),
    ("GET", "/api/shared/{share_id}/status"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
}
ALICE_SECRETS = (
    "alice-secret-title",
    "alice-secret-message",
    "alice-secret-model",
    "alice-secret-file",
)


@dataclass
class Alice:
    session_id: str
    chat_id: str
    message_id: str
    attachment_id: str


def routes() -> list[tuple[str, str]]:
    """(method, path) of every route, through included routers too."""
    found = set()
    for context in iter_route_contexts(create_app(Settings).routes):
        path = context.path
        for method in context.methods or ():
            if method != "HEAD" and path:
                found.add((method, path))
    return sorted(found)


PROTECTED = [route for route in routes() if route not in PUBLIC]


def path_for(path: str, alice: Alice) -> str:
    # a run id: alice's session has none here; another user's real run is tests/agent/test_revert
    values = {
        "session_id": alice.session_id,
        "chat_id": alice.chat_id,
        "run_id": "alice-run",
        "message_id": alice.message_id,
        "attachment_id": alice.attachment_id,
        "port": "8000",  # a preview of alice's session: another user gets 404, not "not listening"
    }
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "unknown-id"), path)


def body_for(method: str, path: str, alice: Alice) -> Any:
    """A valid body: another user must be refused by ownership, not by validation."""
    sid = alice.session_id
    bodies: dict[tuple[str, str], Any] = {
        ("POST", "/api/sessions"): {"title": "mallory's"},
        ("PATCH", "/api/sessions/{session_id}"): {"title": "renamed by mallory"},
        ("POST", "/api/sessions/{session_id}/chats"): {"id": "mallory-chat"},
        ("PATCH", "/api/sessions/{session_id}/chats/{chat_id}"): {"title": "mallory"},
        ("POST", "/api/sessions/{session_id}/chats/{chat_id}/messages"): {
            "message": {"id": "mallory-msg", "role": "user", "parts": []}
        },
        ("POST", "/api/sessions/{session_id}/sandbox/exec"): {"command": "id"},
        ("PUT", "/api/user/preferences"): {"autoCommitPush": True},
        ("POST", "/api/sandbox"): {"sessionId": sid},
        ("POST", "/api/sandbox/activity"): {"sessionId": sid},
        ("POST", "/api/sandbox/extend"): {"sessionId": sid},
        ("POST", "/api/sandbox/snapshot"): {"sessionId": sid},
        ("PUT", "/api/sandbox/snapshot"): {"sessionId": sid},
        ("POST", "/api/chat"): {
            "sessionId": sid,
            "chatId": alice.chat_id,
            "message": {"id": "mallory-turn", "role": "user", "parts": []},
        },
        ("POST", "/api/chat/{chat_id}/respond"): {"toolCallId": "call-1", "approved": True},
        ("POST", "/api/repositories"): {"name": "mallory-repo"},
        ("POST", "/api/sessions/{session_id}/repository"): {
            "repoUrl": "https://github.com/mallory/app"
        },
        ("POST", "/api/sessions/{session_id}/ports/{port}/preview"): {"visibility": "public"},
    }
    if (method, path) in bodies:
        return bodies[(method, path)]
    return {} if method in ("POST", "PUT", "PATCH") else None


def query_for(path: str, alice: Alice) -> dict[str, str] | None:
    if path == "/api/sandbox/status":
        return {"sessionId": alice.session_id}
    if path.endswith("/files/content"):
        return {"path": "README.md"}
    return None


def known(method: str, path: str) -> bool:
    return "{" not in path or all(
        p in ("session_id", "chat_id", "run_id", "message_id", "attachment_id", "port")
        for p in re.findall(r"\{(\w+)\}", path)
    )


@pytest.fixture
def served(settings: Settings) -> Iterator[tuple[HttpApi, Alice]]:
    with local_server(settings) as base_url:
        api = HttpApi(settings, base_url)
        alice = seed(api)
        yield api, alice
        api.client.close()


def seed(api: Any) -> Alice:
    created = api.post("/api/sessions", {"title": "alice-secret-title"})
    assert created.status == 201, created.body
    sid, chat = created.body["session"]["id"], created.body["chat"]["id"]
    message = {
        "message": {
            "id": "alice-msg-1",
            "role": "user",
            "parts": [{"type": "text", "text": "alice-secret-message"}],
        }
    }
    posted = api.post(f"/api/sessions/{sid}/chats/{chat}/messages", message)
    assert posted.status == 200, posted.body
    prefs = {"autoCommitPush": True, "autoCreatePr": True}
    assert api.put("/api/user/preferences", prefs).status == 200
    uploaded = api.request(
        "POST",
        f"/api/sessions/{sid}/attachments",
        raw_body=b"alice-secret-file\n",
        headers={"content-type": "text/plain"},
    )
    assert uploaded.status == 201, uploaded.body
    return Alice(sid, chat, "alice-msg-1", uploaded.body["id"])


def state_of(api: Any, alice: Alice) -> Any:
    session = api.get(f"/api/sessions/{alice.session_id}").body["session"]
    chats = api.get(f"/api/sessions/{alice.session_id}/chats").body["chats"]
    messages = api.get(f"/api/sessions/{alice.session_id}/chats/{alice.chat_id}/messages").body[
        "messages"
    ]
    events = api.get(f"/api/sessions/{alice.session_id}/events").body["events"]
    prefs = api.get("/api/user/preferences").body
    return (
        {k: session[k] for k in ("title", "status", "lifecycleState", "updatedAt")},
        sorted(c["id"] for c in chats),
        messages,
        [e["id"] for e in events],
        prefs,
    )


def tokens(settings: Settings, api: HttpApi) -> dict[str, str | None]:
    now = int(time.time())
    claims = {
        "sub": "alice",
        "username": "alice",
        "iss": settings.jwt_issuer,
        "aud": settings.jwt_audience,
        "iat": now,
        "exp": now + 600,
    }
    secret = (settings.home / "jwt-secret").read_text().strip()
    return {
        "no token": None,
        "malformed": "Bearer not.a.jwt",
        "not bearer": "Basic YWxpY2U6c2VjcmV0",
        "wrong signature": "Bearer " + jwt.encode(claims, "not-the-secret" * 4, algorithm="HS256"),
        "expired": "Bearer "
        + jwt.encode({**claims, "iat": now - 7200, "exp": now - 3600}, secret, algorithm="HS256"),
        "unsigned (alg none)": "Bearer " + jwt.encode(claims, "", algorithm="none"),
        "wrong audience": "Bearer "
        + jwt.encode({**claims, "aud": "someone-else"}, secret, algorithm="HS256"),
    }


def assert_no_leak(reply: Reply, alice: Alice, where: str) -> None:
    text = repr(reply.body)
    for secret in (*ALICE_SECRETS, alice.chat_id, alice.message_id):
        assert secret not in text, f"{where} leaked {secret!r}: {text[:500]}"


def call(api: Api, method: str, path: str, alice: Alice, **kw: Any) -> Reply:
    return api.request(
        method,
        path_for(path, alice),
        json_body=body_for(method, path, alice),
        query=query_for(path, alice),
        **kw,
    )


def test_the_route_table_is_what_this_suite_expects() -> None:
    # the matrix below would silently skip nothing, but a public route must be deliberate
    assert {r for r in routes() if r in PUBLIC} == PUBLIC, set(routes()) ^ PUBLIC
    assert len(PROTECTED) >= 25, PROTECTED
    unknown = [r for r in PROTECTED if not known(*r)]
    assert not unknown, f"give these path parameters a value in path_for(): {unknown}"


def test_bad_tokens_are_401_on_every_route(
    settings: Settings, served: tuple[HttpApi, Alice]
) -> None:
    api, alice = served
    before = state_of(api, alice)
    failures: list[tuple[Any, ...]] = []
    for kind, header in tokens(settings, api).items():
        headers = {"authorization": header} if header else {}
        for method, path in PROTECTED:
            reply = call(api, method, path, alice, user=None, headers=headers)
            if reply.status != 401 or (reply.body or {}).get("code") != "unauthenticated":
                failures.append((kind, method, path, reply.status, reply.body))
            elif reply.headers.get("www-authenticate") != "Bearer":
                failures.append((kind, method, path, "no WWW-Authenticate", reply.headers))
            assert_no_leak(reply, alice, f"{kind} {method} {path}")
    # Schema validation runs after authentication: a body of the wrong shape is still 401.
    # FastAPI parses the JSON before it solves dependencies, so a body that is not JSON at all
    # is 400 invalid_json even without a token: that tells a stranger nothing but the fact.
    for method, path in PROTECTED:
        if method in ("POST", "PUT", "PATCH"):
            shape = api.request(method, path_for(path, alice), user=None, json_body={"x": [1]})
            if shape.status != 401:
                failures.append(("wrong shape", method, path, shape.status, shape.body))
            broken = api.request(method, path_for(path, alice), user=None, raw_body=b"{no json")
            if (broken.status, (broken.body or {}).get("code")) not in (
                (401, "unauthenticated"),
                (400, "invalid_json"),
            ):
                failures.append(("not json", method, path, broken.status, broken.body))
    assert not failures, failures
    assert state_of(api, alice) == before


def expect_for_other_user(method: str, path: str) -> set[int]:
    """Routes on a session answer 404; the caller's own collections answer for the caller."""
    on_a_session = "{session_id}" in path or "{chat_id}" in path or path == "/api/chat"
    if on_a_session or path.startswith("/api/sandbox"):
        return {404} if body_for(method, path, _DUMMY) != {} else {404, 422}
    if (method, path) == ("POST", "/api/sessions"):
        return {201}
    if (method, path) in (("GET", "/api/repositories/branches"), ("POST", "/api/repositories")):
        return {400}  # the caller's own picker: no repoUrl given; no GitHub to create on
    return {200}


_DUMMY = Alice("s", "c", "m", "a")


def test_another_user_gets_404_and_never_data(served: tuple[HttpApi, Alice]) -> None:
    api, alice = served
    before = state_of(api, alice)
    failures: list[tuple[Any, ...]] = []
    for method, path in PROTECTED:
        reply = call(api, method, path, alice, user="mallory")
        expected = expect_for_other_user(method, path)
        if reply.status not in expected:
            failures.append((method, path, reply.status, reply.body))
        if reply.status == 404:
            assert reply.body["code"] == "not_found", (method, path, reply.body)
        assert reply.status < 500, (method, path, reply.body)
        assert_no_leak(reply, alice, f"mallory {method} {path}")
    assert not failures, failures
    assert state_of(api, alice) == before
    # mallory's own list shows only what mallory created
    listed = api.get("/api/sessions", user="mallory").body["sessions"]
    assert [s["title"] for s in listed] == ["mallory's"]


def test_aws_mode_trusts_only_authorizer_claims(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)  # alice's attachment, on moto
    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    api = LambdaApi(settings.model_copy(update={"artifact_bucket": bucket}))
    alice = seed(api)
    before = state_of(api, alice)
    failures: list[tuple[Any, ...]] = []
    for method, path in PROTECTED:
        anonymous = call(api, method, path, alice, user=None)
        if anonymous.status != 401:
            failures.append(("no claims", method, path, anonymous.status, anonymous.body))
        other = call(api, method, path, alice, user="mallory")
        if other.status not in expect_for_other_user(method, path):
            failures.append(("other user", method, path, other.status, other.body))
        # a bearer token in AWS mode is ignored: API Gateway verified the caller already
        forged = call(
            api,
            method,
            path,
            alice,
            user=None,
            headers={"authorization": "Bearer " + jwt.encode({"sub": "alice"}, "", "none")},
        )
        if forged.status != 401:
            failures.append(("forged bearer", method, path, forged.status, forged.body))
        for reply in (anonymous, other, forged):
            assert reply.status < 500, (method, path, reply.body)
            assert_no_leak(reply, alice, f"aws {method} {path}")
    assert not failures, failures
    assert state_of(api, alice) == before
    # the local sign-in does not exist in AWS mode
    minted = api.post("/api/local/token", {"user": "alice"}, user=None)
    assert minted.status == 404, minted.body


def test_public_routes_need_no_token_and_expose_no_data(
    served: tuple[HttpApi, Alice],
) -> None:
    api, alice = served
    for method, path in sorted(PUBLIC):
        if method != "GET":
            continue
        shared = "{share_id}" in path  # no link of alice's is named: 404, no data
        reply = api.client.get(
            path.replace("{share_id}", "not-a-share"), headers={"user-agent": USER_AGENT}
        )
        assert reply.status_code == (404 if shared else 200), (path, reply.status_code)
        for secret in (*ALICE_SECRETS, alice.session_id, alice.chat_id):
            assert secret not in reply.text, (path, secret)


def test_the_webhook_refuses_unsigned_and_forged_calls(settings: Settings) -> None:
    import hashlib
    import hmac
    import json

    signed = settings.model_copy(update={"github_webhook_secret": "hook-secret"})
    with local_server(signed) as base_url:
        api = HttpApi(signed, base_url)
        alice = seed(api)
        before = state_of(api, alice)
        body = json.dumps(
            {
                "action": "closed",
                "number": 1,
                "pull_request": {"number": 1},
                "repository": {"name": "app", "owner": {"login": "acme"}},
            }
        ).encode()
        forged = "sha256=" + hmac.new(b"guess", body, hashlib.sha256).hexdigest()
        cases = {
            "no headers": ({}, 400),
            "no signature": ({"x-github-event": "pull_request"}, 400),
            "forged": ({"x-github-event": "pull_request", "x-hub-signature-256": forged}, 401),
            "garbage": ({"x-github-event": "pull_request", "x-hub-signature-256": "x"}, 401),
        }
        for name, (headers, status) in cases.items():
            reply = api.request(
                "POST",
                "/api/github/webhook",
                user=None,
                raw_body=body,
                headers={"content-type": "application/json", **headers},
            )
            assert reply.status == status, (name, reply.body)
            assert_no_leak(reply, alice, name)
        assert state_of(api, alice) == before
        api.client.close()
