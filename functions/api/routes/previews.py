"""Previews: the ports listening in a session's sandbox, and private links to them."""

from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam

from functions.api.deps import App, Caller
from functions.api.preview_schemas import PortOut, PortsOut, PreviewIn, PreviewOut
from functions.api.schemas import error_responses

router = APIRouter(prefix="/api", tags=["previews"])
ERRORS = error_responses(409)
Port = Annotated[int, PathParam(ge=1, le=65535, description="A TCP port in the sandbox")]


@router.get("/sessions/{session_id}/ports", responses=ERRORS)
def list_ports(session_id: str, app: App, caller: Caller) -> PortsOut:
    """The TCP ports listening inside the sandbox (loopback-bound ones included); 409
    `sandbox_not_running` when it is not running."""
    return PortsOut(ports=[PortOut.of(p) for p in app.previews.ports(caller, session_id)])


@router.post("/sessions/{session_id}/ports/{port}/preview", responses=ERRORS)
def create_preview(
    session_id: str, port: Port, app: App, caller: Caller, body: PreviewIn | None = None
) -> PreviewOut:
    """A private, short-lived link to the port: visiting it sets a cookie for that preview host
    alone and redirects to `path`. 404 `port_not_listening` when nothing listens there."""
    path = body.path if body is not None else None
    return PreviewOut.of(app.previews.create(caller, session_id, port, path))
