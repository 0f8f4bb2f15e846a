"""The GitHub adapter: exact requests (method, path, query, headers, JSON bodies) against
``httpx.MockTransport``, plus a real local HTTP server for the 404, 401 and rate-limit replies."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from openagents.domain.models import PrStatus, Repo
from openagents.git import GitHostError, PullRequest
from openagents.git.github import GitHubApp, GitHubHost, StaticToken

NOW = 1_750_000_000.0
PAT = "github_pat_11AAAA_secretsecretsecret"
INSTALLATION_TOKEN = "ghs_installationtoken0001"
REPO = Repo(owner="octo", name="hello", clone_url="https://github.com/octo/hello.git")
Handler = Callable[[httpx.Request], httpx.Response]


def pr_json(number: int = 7, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "number": number,
        "state": "open",
        "merged_at": None,
        "html_url": f"https://github.com/octo/hello/pull/{number}",
        "head": {"ref": "oa/feature", "sha": "abc"},
        "base": {"ref": "main", "sha": "def"},
        "title": "Add feature",
    }
    data.update(overrides)
    return data


def _constant(response: httpx.Response) -> Handler:
    return lambda _request: response


@dataclass
class FakeGitHub:
    """Routes ``(method, path)`` to queued replies and records every request."""

    routes: dict[tuple[str, str], list[Handler]] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, path: str, *replies: httpx.Response | Handler) -> None:
        queue = self.routes.setdefault((method, path), [])
        for reply in replies:
            queue.append(reply if callable(reply) else _constant(reply))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queue = self.routes.get((request.method, request.url.path))
        if not queue:
            return httpx.Response(599, json={"message": f"unexpected {request.url}"})
        handler = queue.pop(0) if len(queue) > 1 else queue[0]
        return handler(request)

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


class Clock:
    def __init__(self) -> None:
        self.now = NOW
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture
def github() -> FakeGitHub:
    return FakeGitHub()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def token_reads() -> list[str]:
    return []


@pytest.fixture
def host(github: FakeGitHub, clock: Clock, token_reads: list[str]) -> Iterator[GitHubHost]:
    def source() -> str:
        token_reads.append(PAT)
        return PAT

    with GitHubHost(
        StaticToken(source),
        transport=httpx.MockTransport(github),
        clock=clock,
        sleep=clock.sleep,
    ) as made:
        yield made


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def app_host(github: FakeGitHub, clock: Clock, rsa_key: rsa.RSAPrivateKey) -> Iterator[GitHubHost]:
    pem = rsa_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    credentials = GitHubApp(app_id="123456", private_key=lambda: pem)
    with GitHubHost(
        credentials, transport=httpx.MockTransport(github), clock=clock, sleep=clock.sleep
    ) as made:
        yield made


def expires_in(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def install_app(github: FakeGitHub, *tokens: str, lifetime: float = 3600) -> None:
    github.on("GET", "/repos/octo/hello/installation", httpx.Response(200, json={"id": 42}))
    replies = [
        httpx.Response(201, json={"token": token, "expires_at": expires_in(lifetime)})
        for token in tokens
    ]
    github.on("POST", "/app/installations/42/access_tokens", *replies)


def bearer(request: httpx.Request) -> str:
    return request.headers["authorization"].removeprefix("Bearer ")


# ---------------------------------------------------------------------- requests and mapping


def test_pull_request_by_number_sends_github_headers(host: GitHubHost, github: FakeGitHub) -> None:
    github.on("GET", "/repos/octo/hello/pulls/7", httpx.Response(200, json=pr_json()))

    found = host.pull_request(REPO, 7)

    assert found == PullRequest(
        number=7,
        state=PrStatus.OPEN,
        url="https://github.com/octo/hello/pull/7",
        head_branch="oa/feature",
        base_branch="main",
        title="Add feature",
    )
    (request,) = github.requests
    assert str(request.url) == "https://api.github.com/repos/octo/hello/pulls/7"
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2022-11-28"
    assert request.headers["authorization"] == f"Bearer {PAT}"
    assert request.headers["user-agent"] == "openagents-control-plane"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"state": "open"}, PrStatus.OPEN),
        ({"state": "closed"}, PrStatus.CLOSED),
        ({"state": "closed", "merged_at": "2025-01-01T00:00:00Z"}, PrStatus.MERGED),
        ({"state": "closed", "merged": True}, PrStatus.MERGED),
        ({"state": "closed", "merged": False, "merged_at": None}, PrStatus.CLOSED),
    ],
)
def test_merged_when_merged_else_closed_else_open(
    host: GitHubHost, github: FakeGitHub, overrides: dict[str, Any], expected: PrStatus
) -> None:
    github.on("GET", "/repos/octo/hello/pulls/7", httpx.Response(200, json=pr_json(**overrides)))
    found = host.pull_request(REPO, 7)
    assert found is not None
    assert found.state is expected


def test_pull_request_for_branch_asks_for_the_most_recent_of_any_state(
    host: GitHubHost, github: FakeGitHub
) -> None:
    merged = pr_json(9, state="closed", merged_at="2025-01-01T00:00:00Z")
    github.on("GET", "/repos/octo/hello/pulls", httpx.Response(200, json=[merged]))

    found = host.pull_request_for_branch(REPO, "oa/feature")

    assert found is not None
    assert (found.number, found.state) == (9, PrStatus.MERGED)
    assert dict(github.requests[0].url.params) == {
        "head": "octo:oa/feature",
        "state": "all",
        "sort": "updated",
        "direction": "desc",
        "per_page": "1",
    }


def test_lookups_answer_none_on_404_and_empty_lists(host: GitHubHost, github: FakeGitHub) -> None:
    missing = httpx.Response(404, json={"message": "Not Found"})
    github.on("GET", "/repos/octo/hello/pulls/8", missing)
    github.on("GET", "/repos/octo/hello", missing)
    github.on("GET", "/repos/octo/hello/pulls", httpx.Response(200, json=[]))

    assert host.pull_request(REPO, 8) is None
    assert host.default_branch(REPO) is None
    assert host.pull_request_for_branch(REPO, "nobody") is None


def test_default_branch(host: GitHubHost, github: FakeGitHub) -> None:
    github.on("GET", "/repos/octo/hello", httpx.Response(200, json={"default_branch": "trunk"}))
    assert host.default_branch(REPO) == "trunk"


def test_create_pull_request_posts_the_exact_body(host: GitHubHost, github: FakeGitHub) -> None:
    github.on("POST", "/repos/octo/hello/pulls", httpx.Response(201, json=pr_json(11)))

    created = host.create_pull_request(
        REPO, head_branch="oa/feature", base_branch="main", title="Add feature", body="Why."
    )

    assert (created.number, created.state) == (11, PrStatus.OPEN)
    (request,) = github.requests
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        "title": "Add feature",
        "head": "oa/feature",
        "base": "main",
        "body": "Why.",
    }


def test_merge_puts_the_method_and_reads_the_merged_pull_request(
    host: GitHubHost, github: FakeGitHub
) -> None:
    merged = pr_json(7, state="closed", merged_at="2026-12-01T12:00:00Z")
    github.on("PUT", "/repos/octo/hello/pulls/7/merge", httpx.Response(200, json={"merged": True}))
    github.on("GET", "/repos/octo/hello/pulls/7", httpx.Response(200, json=merged))

    done = host.merge_pull_request(REPO, 7, method="squash")

    assert (done.number, done.state) == (7, PrStatus.MERGED)
    assert github.paths() == [
        "PUT /repos/octo/hello/pulls/7/merge",
        "GET /repos/octo/hello/pulls/7",
    ]
    assert json.loads(github.requests[0].content) == {"merge_method": "squash"}
    assert github.requests[0].headers["authorization"] == f"Bearer {PAT}"


@pytest.mark.parametrize("status", [405, 409])
def test_not_mergeable_carries_githubs_reason(
    host: GitHubHost, github: FakeGitHub, status: int
) -> None:
    reply = httpx.Response(status, json={"message": "Pull Request is not mergeable"})
    github.on("PUT", "/repos/octo/hello/pulls/7/merge", reply)

    with pytest.raises(GitHostError) as refused:
        host.merge_pull_request(REPO, 7, method="merge")

    assert refused.value.status == 405
    assert refused.value.message == "Pull Request is not mergeable"


def test_close_patches_an_open_pull_request_and_leaves_a_closed_one(
    host: GitHubHost, github: FakeGitHub
) -> None:
    github.on(
        "GET",
        "/repos/octo/hello/pulls/7",
        httpx.Response(200, json=pr_json(7)),
        httpx.Response(200, json=pr_json(7, state="closed")),
    )
    github.on(
        "PATCH", "/repos/octo/hello/pulls/7", httpx.Response(200, json=pr_json(7, state="closed"))
    )

    assert host.close_pull_request(REPO, 7).state is PrStatus.CLOSED
    assert json.loads(github.requests[1].content) == {"state": "closed"}
    assert host.close_pull_request(REPO, 7).state is PrStatus.CLOSED  # already closed: no PATCH
    assert github.paths().count("PATCH /repos/octo/hello/pulls/7") == 1


def test_create_race_returns_the_existing_pull_request(
    host: GitHubHost, github: FakeGitHub
) -> None:
    exists = {
        "message": "Validation Failed",
        "errors": [
            {
                "resource": "PullRequest",
                "code": "custom",
                "message": "A pull request already exists for octo:oa/feature.",
            }
        ],
    }
    github.on("POST", "/repos/octo/hello/pulls", httpx.Response(422, json=exists))
    github.on("GET", "/repos/octo/hello/pulls", httpx.Response(200, json=[pr_json(5)]))

    created = host.create_pull_request(
        REPO, head_branch="oa/feature", base_branch="main", title="t", body="b"
    )

    assert created.number == 5
    assert github.paths() == ["POST /repos/octo/hello/pulls", "GET /repos/octo/hello/pulls"]
    assert dict(github.requests[1].url.params) == {
        "head": "octo:oa/feature",
        "base": "main",
        "state": "open",
        "sort": "updated",
        "direction": "desc",
        "per_page": "1",
    }


def test_create_validation_failure_is_a_readable_error(
    host: GitHubHost, github: FakeGitHub
) -> None:
    failed = {
        "message": "Validation Failed",
        "errors": [{"message": "No commits between main and oa/feature"}],
    }
    github.on("POST", "/repos/octo/hello/pulls", httpx.Response(422, json=failed))

    with pytest.raises(GitHostError) as caught:
        host.create_pull_request(
            REPO, head_branch="oa/feature", base_branch="main", title="t", body="b"
        )

    assert caught.value.status == 422
    assert "No commits between main and oa/feature" in str(caught.value)
    assert "creating a pull request from oa/feature into main" in str(caught.value)


def test_enterprise_base_url_keeps_its_path(github: FakeGitHub) -> None:
    github.on("GET", "/api/v3/repos/octo/hello", httpx.Response(200, json={"default_branch": "m"}))
    with GitHubHost(
        StaticToken(lambda: PAT),
        base_url="https://ghe.example.com/api/v3/",
        transport=httpx.MockTransport(github),
    ) as host:
        assert host.default_branch(REPO) == "m"
    assert str(github.requests[0].url) == "https://ghe.example.com/api/v3/repos/octo/hello"


def test_a_repository_without_owner_is_refused(host: GitHubHost, github: FakeGitHub) -> None:
    with pytest.raises(GitHostError, match="owner and name"):
        host.pull_request(Repo(name="x", clone_url="file:///srv/x.git"), 1)
    assert github.requests == []


def test_transport_failure_is_a_git_host_error_without_status(token_reads: list[str]) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    host = GitHubHost(StaticToken(lambda: PAT), transport=httpx.MockTransport(refuse))
    with host, pytest.raises(GitHostError) as caught:
        host.default_branch(REPO)
    assert caught.value.status is None
    assert "ConnectError" in str(caught.value)


# ---------------------------------------------------------------------- static token


def test_static_token_is_read_lazily_once_and_is_the_clone_token(
    host: GitHubHost, github: FakeGitHub, token_reads: list[str]
) -> None:
    assert token_reads == []  # nothing fetched at construction
    github.on("GET", "/repos/octo/hello", httpx.Response(200, json={"default_branch": "main"}))

    assert host.clone_token(REPO) == PAT
    host.default_branch(REPO)
    host.default_branch(REPO)

    assert len(token_reads) == 1


def test_a_401_refetches_the_static_token_and_retries_once(
    host: GitHubHost, github: FakeGitHub, token_reads: list[str]
) -> None:
    github.on(
        "GET",
        "/repos/octo/hello",
        httpx.Response(401, json={"message": "Bad credentials"}),
        httpx.Response(200, json={"default_branch": "main"}),
    )

    assert host.default_branch(REPO) == "main"
    assert len(token_reads) == 2
    assert len(github.requests) == 2


def test_a_second_401_is_an_error_naming_no_token(
    host: GitHubHost, github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github.on("GET", "/repos/octo/hello", httpx.Response(401, json={"message": "Bad credentials"}))

    with pytest.raises(GitHostError) as caught:
        host.default_branch(REPO)

    assert caught.value.status == 401
    assert "rejected the credentials" in str(caught.value)
    assert len(github.requests) == 2  # one retry, no loop
    assert PAT not in str(caught.value)
    assert PAT not in caplog.text


def test_errors_never_echo_the_token(
    host: GitHubHost, github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"message": f"boom: {request.headers['authorization']}"})

    github.on("GET", "/repos/octo/hello/pulls/3", echo)

    with pytest.raises(GitHostError) as caught:
        host.pull_request(REPO, 3)

    assert caught.value.status == 500
    assert "boom: Bearer ***" in str(caught.value)
    assert PAT not in str(caught.value)
    assert PAT not in repr(caught.value.args)
    assert PAT not in caplog.text


def test_an_empty_token_source_is_refused(github: FakeGitHub) -> None:
    host = GitHubHost(StaticToken(lambda: "  "), transport=httpx.MockTransport(github))
    with host, pytest.raises(GitHostError, match="empty token"):
        host.clone_token(REPO)


# ---------------------------------------------------------------------- rate limits


def test_a_short_retry_after_is_waited_once(
    host: GitHubHost, github: FakeGitHub, clock: Clock
) -> None:
    github.on(
        "GET",
        "/repos/octo/hello",
        httpx.Response(403, headers={"retry-after": "1"}, json={"message": "secondary"}),
        httpx.Response(200, json={"default_branch": "main"}),
    )
    assert host.default_branch(REPO) == "main"
    assert clock.slept == [1.0]


def test_a_rate_limit_after_the_short_retry_is_an_error(
    host: GitHubHost, github: FakeGitHub, clock: Clock
) -> None:
    github.on("GET", "/repos/octo/hello", httpx.Response(429, headers={"retry-after": "2"}))

    with pytest.raises(GitHostError) as caught:
        host.default_branch(REPO)

    assert (caught.value.status, caught.value.retry_after) == (429, 2.0)
    assert "rate limit" in str(caught.value)
    assert clock.slept == [2.0]
    assert len(github.requests) == 2


def test_a_long_rate_limit_raises_without_waiting(
    host: GitHubHost, github: FakeGitHub, clock: Clock
) -> None:
    reset = str(int(NOW) + 600)
    limited = httpx.Response(
        403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
        json={"message": "API rate limit exceeded"},
    )
    github.on("GET", "/repos/octo/hello/pulls/1", limited)

    with pytest.raises(GitHostError) as caught:
        host.pull_request(REPO, 1)

    assert caught.value.status == 403
    assert caught.value.retry_after == 600.0
    assert "retry after 600 s" in str(caught.value)
    assert clock.slept == []
    assert len(github.requests) == 1


def test_a_plain_403_is_not_a_rate_limit(host: GitHubHost, github: FakeGitHub) -> None:
    github.on("GET", "/repos/octo/hello", httpx.Response(403, json={"message": "Forbidden"}))
    with pytest.raises(GitHostError) as caught:
        host.default_branch(REPO)
    assert (caught.value.status, caught.value.retry_after) == (403, None)
    assert "403 Forbidden" in str(caught.value)


# ---------------------------------------------------------------------- GitHub App


def test_app_mints_a_jwt_and_a_scoped_installation_token(
    app_host: GitHubHost, github: FakeGitHub, rsa_key: rsa.RSAPrivateKey
) -> None:
    install_app(github, INSTALLATION_TOKEN)

    assert app_host.clone_token(REPO) == INSTALLATION_TOKEN

    lookup, exchange = github.requests
    assert f"{lookup.method} {lookup.url.path}" == "GET /repos/octo/hello/installation"
    assert f"{exchange.method} {exchange.url.path}" == "POST /app/installations/42/access_tokens"
    assert json.loads(exchange.content) == {
        "repositories": ["hello"],
        "permissions": {"contents": "write", "pull_requests": "write"},
    }
    for request in (lookup, exchange):
        claims = jwt.decode(
            bearer(request),
            rsa_key.public_key(),
            algorithms=["RS256"],
            options={"verify_exp": False, "verify_iat": False},
        )
        assert claims == {"iat": int(NOW) - 60, "exp": int(NOW) + 540, "iss": "123456"}
        assert jwt.get_unverified_header(bearer(request))["alg"] == "RS256"


def test_app_installation_token_is_cached_and_used_for_the_api(
    app_host: GitHubHost, github: FakeGitHub
) -> None:
    install_app(github, INSTALLATION_TOKEN)
    github.on("GET", "/repos/octo/hello/pulls/7", httpx.Response(200, json=pr_json()))

    app_host.clone_token(REPO)
    app_host.pull_request(REPO, 7)
    app_host.pull_request(REPO, 7)

    assert github.paths() == [
        "GET /repos/octo/hello/installation",
        "POST /app/installations/42/access_tokens",
        "GET /repos/octo/hello/pulls/7",
        "GET /repos/octo/hello/pulls/7",
    ]
    assert github.requests[2].headers["authorization"] == f"Bearer {INSTALLATION_TOKEN}"


def test_app_token_is_refreshed_five_minutes_before_it_expires(
    app_host: GitHubHost, github: FakeGitHub, clock: Clock
) -> None:
    install_app(github, INSTALLATION_TOKEN, "ghs_second", lifetime=3600)

    assert app_host.clone_token(REPO) == INSTALLATION_TOKEN
    clock.now = NOW + 3600 - 301
    assert app_host.clone_token(REPO) == INSTALLATION_TOKEN
    clock.now = NOW + 3600 - 299
    assert app_host.clone_token(REPO) == "ghs_second"

    exchanges = [p for p in github.paths() if p.startswith("POST")]
    assert len(exchanges) == 2
    assert github.paths().count("GET /repos/octo/hello/installation") == 1  # id cached


def test_app_not_installed_means_no_token_and_anonymous_reads(
    app_host: GitHubHost, github: FakeGitHub
) -> None:
    github.on("GET", "/repos/octo/hello/installation", httpx.Response(404, json={}))
    github.on("GET", "/repos/octo/hello", httpx.Response(200, json={"default_branch": "main"}))

    assert app_host.clone_token(REPO) is None
    assert app_host.default_branch(REPO) == "main"
    assert "authorization" not in github.requests[-1].headers

    del github.routes[("GET", "/repos/octo/hello/installation")]
    install_app(github, INSTALLATION_TOKEN)  # installed since: noticed on the next call
    assert app_host.clone_token(REPO) == INSTALLATION_TOKEN


def test_app_token_rejected_mints_a_new_one(app_host: GitHubHost, github: FakeGitHub) -> None:
    install_app(github, INSTALLATION_TOKEN, "ghs_second")
    github.on(
        "GET",
        "/repos/octo/hello/pulls/7",
        httpx.Response(401, json={"message": "Bad credentials"}),
        httpx.Response(200, json=pr_json()),
    )

    assert app_host.pull_request(REPO, 7) is not None
    api_calls = [r for r in github.requests if r.url.path.endswith("/pulls/7")]
    assert [bearer(r) for r in api_calls] == [INSTALLATION_TOKEN, "ghs_second"]


def test_app_key_rejected_is_a_clear_error(
    app_host: GitHubHost, github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github.on("GET", "/repos/octo/hello/installation", httpx.Response(401, json={"message": "x"}))

    with pytest.raises(GitHostError) as caught:
        app_host.clone_token(REPO)

    assert caught.value.status == 401
    assert "app installation for octo/hello" in str(caught.value)
    app_jwt = bearer(github.requests[0])
    assert app_jwt not in str(caught.value)
    assert app_jwt not in caplog.text


def test_reprs_show_no_secret(app_host: GitHubHost, github: FakeGitHub) -> None:
    install_app(github, INSTALLATION_TOKEN)
    app_host.clone_token(REPO)
    cached = app_host._tokens._tokens  # type: ignore[union-attr]
    assert INSTALLATION_TOKEN not in repr(cached)
    assert PAT not in repr(StaticToken(lambda: PAT))


# ---------------------------------------------------------------------- a real local server


class _FakeGitHubServer(BaseHTTPRequestHandler):
    """Speaks GitHub's JSON for a few paths: 404, 401 and rate-limit replies included."""

    seen: list[tuple[str, str | None]] = []  # noqa: RUF012 - shared with the test by design

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/repos/octo/hello/pulls/7":
            self._reply(200, pr_json(state="closed", merged_at="2025-01-01T00:00:00Z"))
        elif self.path == "/repos/octo/hello/pulls/404":
            self._reply(404, {"message": "Not Found"})
        elif self.path == "/repos/octo/locked":
            self._reply(401, {"message": "Bad credentials"})
        elif self.path == "/repos/octo/busy":
            self._reply(429, {"message": "slow down"}, {"Retry-After": "30"})
        else:
            self._reply(500, {"message": "unexpected"})

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    _FakeGitHubServer.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGitHubServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_against_a_local_http_server(local_server: str, clock: Clock) -> None:
    with GitHubHost(
        StaticToken(lambda: PAT), base_url=local_server, clock=clock, sleep=clock.sleep
    ) as host:
        merged = host.pull_request(REPO, 7)
        assert merged is not None
        assert merged.state is PrStatus.MERGED
        assert host.pull_request(REPO, 404) is None
        with pytest.raises(GitHostError) as unauthorized:
            host.default_branch(Repo(owner="octo", name="locked"))
        with pytest.raises(GitHostError) as limited:
            host.default_branch(Repo(owner="octo", name="busy"))

    assert unauthorized.value.status == 401
    assert (limited.value.status, limited.value.retry_after) == (429, 30.0)
    assert clock.slept == []  # 30 s is too long to wait in a request
    assert _FakeGitHubServer.seen[0] == ("/repos/octo/hello/pulls/7", f"Bearer {PAT}")
    assert PAT not in str(unauthorized.value) + str(limited.value)
