"""The AWS preview gateway's own parts: the task address lookup (ECS DescribeTasks, stubbed
with botocore's Stubber), and the gateway app: the ALB's health check, other names 404, a
preview host refused without its cookie before any sandbox is reached, on ``https`` with a
``Secure`` cookie."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from openagents.auth.previews import Grant, Kind, sign
from openagents.domain.models import SandboxHandle
from openagents.sandbox.fargate_address import TaskAddresses
from openagents.sandbox.port import SandboxError
from openagents.services.previews import Previews, PreviewSite
from openagents.settings import Settings
from starlette.testclient import TestClient

from functions.api.preview import COOKIE
from functions.api.preview_gateway import HEALTH_PATH, Gateway, create_app

CLUSTER = "openagents-dev"
TASK = "arn:aws:ecs:us-east-1:123456789012:task/openagents-dev/abc"
DOMAIN = "preview.example.com"
KEY = b"k" * 32
HANDLE = SandboxHandle(driver="fargate", session_id="S1", generation=1, ref=TASK)


def _task(status: str = "RUNNING", address: str | None = "10.40.16.7") -> dict[str, Any]:
    details = [{"name": "privateIPv4Address", "value": address}] if address else []
    return {
        "taskArn": TASK,
        "lastStatus": status,
        "desiredStatus": "RUNNING",
        "attachments": [{"type": "ElasticNetworkInterface", "details": details}],
    }


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ecs() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "ecs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_a_running_tasks_private_address_is_asked_of_ecs_and_kept_a_while(
    ecs: tuple[Any, Stubber],
) -> None:
    client, stubber = ecs
    clock = Clock()
    addresses = TaskAddresses(client, CLUSTER, 8080, ttl=30, clock=clock)
    expected = {"cluster": CLUSTER, "tasks": [TASK]}
    stubber.add_response("describe_tasks", {"tasks": [_task()]}, expected)
    assert addresses.endpoint(HANDLE) == "http://10.40.16.7:8080"
    clock.now += 29  # kept: no second call (the stubber would fail on one)
    assert addresses.endpoint(HANDLE) == "http://10.40.16.7:8080"
    clock.now += 2  # stale: asked again, and the task moved on to another address
    stubber.add_response("describe_tasks", {"tasks": [_task(address="10.40.17.9")]}, expected)
    assert addresses.endpoint(HANDLE) == "http://10.40.17.9:8080"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"tasks": [], "failures": [{"arn": TASK, "reason": "MISSING"}]}, "gone"),
        ({"tasks": [_task(status="STOPPED")]}, "stopped"),
        ({"tasks": [_task(status="PROVISIONING")]}, "provisioning"),
        ({"tasks": [_task(address=None)]}, "no private address"),
    ],
)
def test_a_task_not_running_has_no_address(
    ecs: tuple[Any, Stubber], answer: dict[str, Any], said: str
) -> None:
    client, stubber = ecs
    stubber.add_response("describe_tasks", answer)
    with pytest.raises(SandboxError, match=said) as raised:
        TaskAddresses(client, CLUSTER, 8080).endpoint(HANDLE)
    assert raised.value.status is None  # unreachable: the preview offers Resume


def test_an_ecs_error_is_a_sandbox_error(ecs: tuple[Any, Stubber]) -> None:
    client, stubber = ecs
    stubber.add_client_error("describe_tasks", "AccessDeniedException", "no")
    with pytest.raises(SandboxError, match="DescribeTasks failed"):
        TaskAddresses(client, CLUSTER, 8080).endpoint(HANDLE)


class NoStore:
    """A store the refused requests must never reach."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was called: {name}")


def _clients(handle: SandboxHandle) -> Any:
    raise AssertionError("a sandbox was reached")


def _previews() -> Previews:
    return Previews(
        NoStore(),
        _clients,
        lambda: datetime.fromtimestamp(1000, UTC),
        lambda: KEY,
        PreviewSite("https", DOMAIN, "https://app.example.com"),
    )


@pytest.fixture
def gateway() -> TestClient:
    settings = Settings(mode="aws", preview_domain=DOMAIN, fargate_cluster=CLUSTER)
    app = create_app(settings, lambda: Gateway(_previews()))
    return TestClient(app, base_url=f"https://x.{DOMAIN}", follow_redirects=False)


def _host(port: int = 3000) -> str:
    return _previews().site.host("S1", port)


def test_the_gateway_answers_its_health_check_and_no_other_name(gateway: TestClient) -> None:
    assert gateway.get(HEALTH_PATH, headers={"host": "10.0.0.1:8000"}).text == "ok\n"
    assert gateway.get("/", headers={"host": "example.com"}).status_code == 404
    assert gateway.get("/", headers={"host": "3000-x.localhost"}).status_code == 404


def test_a_preview_without_its_cookie_never_reaches_the_sandbox(gateway: TestClient) -> None:
    host = {"host": _host()}
    assert gateway.get("/", headers=host).status_code == 401
    forged = {**host, "cookie": f"{COOKIE}=forged.token"}
    assert gateway.get("/", headers=forged).status_code == 401
    foreign = {**host, "origin": f"http://{_host()}"}  # the page's origin is https
    assert gateway.get("/", headers=foreign).status_code == 403


def test_a_link_is_traded_for_a_secure_host_only_cookie(gateway: TestClient) -> None:
    grant = Grant(Kind.LINK, "S1", 3000, "alice", expires_at=2000)
    token = sign(KEY, grant)
    answer = gateway.get(f"/__preview/auth?token={token}&path=/app", headers={"host": _host()})
    assert answer.status_code == 302
    assert answer.headers["location"] == "/app"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "; Secure" in cookie
    assert "domain" not in cookie.lower()
    other = gateway.get(f"/__preview/auth?token={token}", headers={"host": _host(3001)})
    assert other.status_code == 401  # a link is for its own port's host only


def test_the_gateways_previews_reach_through_its_clients_and_mark_nothing_lost() -> None:
    lost: list[str] = []
    previews = Previews(
        NoStore(),
        _clients,
        lambda: datetime.fromtimestamp(1000, UTC),
        lambda: KEY,
        PreviewSite("https", DOMAIN),
        on_unreachable=lambda session: lost.append(session.id),
    )
    reached: list[SandboxHandle] = []

    marker: Any = object()

    def through(handle: SandboxHandle) -> Any:
        reached.append(handle)
        return marker

    twin = previews.reaching(through)
    assert twin.client(HANDLE) is marker
    assert reached == [HANDLE]
    assert twin._on_unreachable is None
    assert previews._on_unreachable is not None  # the API's own previews are untouched
    with pytest.raises(AssertionError, match="a sandbox was reached"):
        previews.client(HANDLE)
