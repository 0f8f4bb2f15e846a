"""Request and response bodies of the preview routes (``routes/previews.py``)."""

from datetime import datetime
from typing import Literal, cast

from openagents.services.dev_servers import DevServer
from openagents.services.previews import PreviewLink, PreviewPort
from pydantic import Field

from functions.api.schemas import Body, Out


class PortOut(Out):
    port: int
    address: str = Field(description="The address it listens on inside the sandbox")
    pid: int | None = None
    command: str | None = Field(default=None, description="Its command line, when known")
    preview_host: str = Field(description="The host name its previews are served on")

    @classmethod
    def of(cls, found: PreviewPort) -> "PortOut":
        return cls(
            port=found.port,
            address=found.address,
            pid=found.pid,
            command=found.command,
            preview_host=found.preview_host,
        )


class PortsOut(Out):
    ports: list[PortOut]


Visibility = Literal["private", "public"]


class PreviewIn(Body):
    path: str | None = Field(
        default=None, max_length=2048, description="Where the link lands (default `/`)"
    )
    visibility: Visibility = Field(
        default="private",
        description="`public`: a link anyone may open, without expiry, until revoked (`DELETE`)",
    )


class PreviewOut(Out):
    url: str = Field(description="Open within `expiresAt` (private): it sets the preview's cookie")
    expires_at: datetime | None = Field(description="None for a public link (until revoked)")
    visibility: Visibility = "private"

    @classmethod
    def of(cls, link: PreviewLink) -> "PreviewOut":
        return cls(
            url=link.url,
            expires_at=link.expires_at,
            visibility=cast(Visibility, link.visibility),
        )


class PublicPreviewOut(Out):
    port: int
    url: str = Field(description="The public link (anyone holding it reaches the port)")
    created_at: datetime

    @classmethod
    def of(cls, link: PreviewLink) -> "PublicPreviewOut":
        assert link.port is not None
        assert link.created_at is not None
        return cls(port=link.port, url=link.url, created_at=link.created_at)


class PublicPreviewsOut(Out):
    previews: list[PublicPreviewOut]


class DevServerIn(Body):
    path: str | None = Field(
        default=None, max_length=4096, description="The project's folder in the workspace"
    )
    command: str | None = Field(
        default=None, max_length=4096, description="Run this instead of detecting it"
    )
    port: int | None = Field(default=None, ge=1, le=65535)


Status = Literal["running", "starting", "exited", "stopped"]


class DevServerOut(Out):
    port: int
    command: str
    log_path: str = Field(description="Its output, in the sandbox")
    running: bool
    framework: str | None = None
    url: str | None = Field(default=None, description="A private preview link (on start)")
    log_tail: str | None = Field(default=None, description="The end of its log (on GET)")
    status: Status = Field(
        default="running",
        description="`starting`: launched, its port not listening yet (poll GET)",
    )

    @classmethod
    def of(cls, found: DevServer) -> "DevServerOut":
        return cls(
            port=found.port,
            command=found.command,
            log_path=found.log_path,
            running=found.running,
            framework=found.framework,
            url=found.url,
            log_tail=found.log_tail,
            status=cast(Status, found.status),
        )
