"""The local server answers only the Host names it serves (421 for others: a DNS-rebinding
page's `Host: evil.example` included), and mints local tokens only for loopback clients."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from openagents.settings import Mode, Settings

from functions.api.app import create_app
from functions.api.hosts import host_name, is_loopback, served_names
from tests.support import USER_AGENT, LambdaApi, local_server

FOREIGN = ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhostx", "[::2]"]


@pytest.fixture
def server(settings: Settings) -> Iterator[httpx.Client]:
    configured = settings.model_copy(update={"allowed_hosts": ("dev.example",)})
    with (
        local_server(configured) as base_url,
        httpx.Client(base_url=base_url, headers={"user-agent": USER_AGENT}) as client,
    ):
        yield client


def port_of(client: httpx.Client) -> int:
    port = urlsplit(str(client.base_url)).port
    assert port is not None
    return port


def assert_misdirected(reply: httpx.Response) -> None:
    assert reply.status_code == 421, reply.text
    body = reply.json()
    assert set(body) == {"error", "code", "field"}
    assert body["code"] == "misdirected_request"
    assert "token" not in body


@pytest.mark.parametrize("host", FOREIGN)
def test_a_foreign_host_is_misdirected_everywhere(server: httpx.Client, host: str) -> None:
    assert_misdirected(server.get("/api/health", headers={"host": host}))
    assert_misdirected(server.get("/api/sessions", headers={"host": host}))
    minted = server.post("/api/local/token", json={"user": "bob"}, headers={"host": host})
    assert_misdirected(minted)


def test_loopback_names_and_the_configured_host_are_served(server: httpx.Client) -> None:
    port = port_of(server)
    served = ["127.0.0.1", "localhost", "[::1]", "LOCALHOST", "dev.example", "dev.example:8443"]
    served += [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    for host in served:
        reply = server.get("/api/health", headers={"host": host})
        assert reply.status_code == 200, (host, reply.text)
    minted = server.post("/api/local/token", json={"user": "bob"}, headers={"host": "localhost"})
    assert minted.status_code == 200
    assert minted.json()["user"] == "bob"


def test_a_request_without_host_is_misdirected(server: httpx.Client) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=5) as sock:
        sock.sendall(b"GET /api/health HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 421"), answer[:100]
    assert b"misdirected_request" in answer


def test_the_token_route_refuses_a_client_that_is_not_loopback(settings: Settings) -> None:
    app = create_app(lambda: settings)
    for address in ("203.0.113.5", "10.0.0.2", "::ffff:192.0.2.1", "testclient"):
        remote = TestClient(app, base_url="http://127.0.0.1", client=(address, 40000))
        refused = remote.post("/api/local/token", json={"user": "bob"})
        assert refused.status_code == 403, (address, refused.text)
        assert refused.json()["code"] == "access_denied"
        assert "token" not in refused.json()
        # the address is checked before the body is
        assert remote.post("/api/local/token", json={"user": "a b"}).status_code == 403
    for address in ("127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"):
        local = TestClient(app, base_url="http://localhost", client=(address, 40000))
        assert local.post("/api/local/token", json={"user": "bob"}).status_code == 200, address


def test_a_client_a_local_proxy_forwards_gets_no_token(server: httpx.Client) -> None:
    """uvicorn trusts X-Forwarded-For from loopback: the remote client behind a local reverse
    proxy is the client, and it is not loopback."""
    forwarded = {"x-forwarded-for": "203.0.113.5", "host": "dev.example"}
    refused = server.post("/api/local/token", json={"user": "bob"}, headers=forwarded)
    assert refused.status_code == 403
    assert refused.json()["code"] == "access_denied"


def test_aws_mode_is_unchanged(settings: Settings) -> None:
    aws = LambdaApi(settings.model_copy(update={"artifact_bucket": "unused"}))
    assert aws.settings.mode is Mode.AWS
    for host in ("api.example.com", "evil.example"):
        assert aws.get("/api/health", user=None, headers={"host": host}).status == 200


def test_allowed_hosts_come_comma_separated_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAGENTS_ALLOWED_HOSTS", " Dev.Example , box.lan:8443,, ")
    parsed = Settings()
    assert parsed.allowed_hosts == ("dev.example", "box.lan:8443")
    assert served_names(parsed) == {"127.0.0.1", "localhost", "::1", "dev.example", "box.lan"}


def test_host_names_and_loopback_addresses() -> None:
    assert host_name("[::1]:8000") == "::1"
    assert host_name("LocalHost:80") == "localhost"
    for bad in ("", ":80", "[::1", "[]", "host:port", "a:1:2", "[::1]x"):
        assert host_name(bad) is None, bad
    assert is_loopback("127.9.9.9")
    assert is_loopback("::1")
    assert not is_loopback("192.0.2.1")
    assert not is_loopback(None)
