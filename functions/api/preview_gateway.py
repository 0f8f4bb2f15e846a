"""The preview gateway on AWS: the preview proxy (``preview.py``) as a small ASGI service of
its own, run by uvicorn in an ECS Fargate task behind an internet-facing ALB
(``infra/constructs/previews.py``). It serves ``https://<port>-<session>.<previewDomain>``
only: ``/__preview/healthz`` answers the ALB's health check, every other name is 404.

What it uses of the control plane: the session record (the owner and the sandbox, one GetItem
per request; a preview in use writes the session's activity at most once a minute), the
sandbox token key (the tunnel through sandboxd is authenticated like every sandboxd call), and
ECS DescribeTasks for the task's private address (``sandbox/fargate_address.py``). Built on
the first request, not at import."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openagents import composition
from openagents.sandbox.fargate_address import TaskAddresses
from openagents.sandbox.port import Sandboxd, SandboxHandle
from openagents.services.previews import Previews
from openagents.settings import Settings
from starlette.types import ASGIApp, Receive, Scope, Send

from functions.api.preview import PreviewProxy

HEALTH_PATH = "/__preview/healthz"
SANDBOXD_PORT = 8080  # FargateConfig.sandbox_port, the sandbox security group's only ingress


class _Counted:
    def count(self, name: str, value: int = 1) -> None:  # metrics: none of the gateway's own
        return None


@dataclass(frozen=True)
class Gateway:
    previews: Previews


def build(settings: Settings, ecs: Any | None = None) -> Gateway:
    """The API's own previews (``composition.build``), reaching sandboxes at the address ECS
    gives for their task now."""
    if not settings.preview_domain or not settings.fargate_cluster:
        raise ValueError(
            "the preview gateway needs OPENAGENTS_PREVIEW_DOMAIN and a Fargate cluster"
        )
    container = composition.build(settings, _Counted())
    if ecs is None:
        import boto3

        ecs = boto3.client("ecs", region_name=settings.region)
    addresses = TaskAddresses(ecs, settings.fargate_cluster, SANDBOXD_PORT)
    driver = container.driver

    def reach(handle: SandboxHandle) -> Sandboxd:
        from openagents.sandbox.client import SandboxClient

        return SandboxClient(addresses.endpoint(handle), driver.token(handle))

    return Gateway(container.previews.reaching(reach))


async def _not_ours(scope: Scope, receive: Receive, send: Send) -> None:
    """What is no preview host: the health check, or 404."""
    if scope["type"] != "http":
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        return
    ok = scope["path"] == HEALTH_PATH
    body = b"ok\n" if ok else b"not a preview\n"
    await send({
        "type": "http.response.start", "status": 200 if ok else 404,
        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store")],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def create_app(settings: Settings, gateway: Callable[[], Gateway] | None = None) -> ASGIApp:
    lock = threading.Lock()
    built: list[Gateway] = []

    def get() -> Gateway:
        with lock:
            if not built:
                built.append(build(settings))
            return built[0]

    return PreviewProxy(_not_ours, gateway or get, domain=f".{settings.preview_domain}")


def main() -> None:  # pragma: no cover - the container's entry point
    import uvicorn

    settings = Settings()
    uvicorn.run(
        create_app(settings),
        host="0.0.0.0",  # noqa: S104 - in its own security group, reached by the ALB only
        port=settings.port,  # OPENAGENTS_PORT
        ws="wsproto",
        proxy_headers=False,  # nothing of the client's address is used
        lifespan="off",
        log_level="warning",
    )


if __name__ == "__main__":  # pragma: no cover
    main()
