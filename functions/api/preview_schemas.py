"""Request and response bodies of the preview routes (``routes/previews.py``)."""

from datetime import datetime

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


class PreviewIn(Body):
    path: str | None = Field(
        default=None, max_length=2048, description="Where the link lands (default `/`)"
    )


class PreviewOut(Out):
    url: str = Field(description="Open within `expiresAt`: it sets the preview's cookie")
    expires_at: datetime

    @classmethod
    def of(cls, link: PreviewLink) -> "PreviewOut":
        return cls(url=link.url, expires_at=link.expires_at)
