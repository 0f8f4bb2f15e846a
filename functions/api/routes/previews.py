"""Previews: the ports listening in a session's sandbox, private links to them, and the
project's dev server."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi import Path as PathParam

from functions.api.deps import App, Caller
from functions.api.lazy_route import AnalysedRoute
from functions.api.preview_schemas import (
    DevServerIn,
    DevServerOut,
    PortOut,
    PortsOut,
    PreviewIn,
    PreviewOut,
    PublicPreviewOut,
    PublicPreviewsOut,
)
from functions.api.schemas import error_responses
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute, prefix="/api", tags=["previews"], dependencies=[Depends(known_query)]
)
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
    alone and redirects to `path`. 404 `port_not_listening` when nothing listens there.
    `visibility: "public"`: a link anyone may open until it is revoked (`DELETE`), or its
    session archived or deleted; asked again, the same link."""
    given = body or PreviewIn()
    made = app.previews.create(caller, session_id, port, given.path, given.visibility)
    return PreviewOut.of(made)


@router.delete(
    "/sessions/{session_id}/ports/{port}/preview", status_code=204, responses=error_responses()
)
def revoke_preview(session_id: str, port: Port, app: App, caller: Caller) -> Response:
    """Revoke the port's public preview: its link answers 401 from then on (within 2 s on the
    AWS preview gateway). 404 `preview_not_found` when the port has none."""
    app.previews.revoke(caller, session_id, port)
    return Response(status_code=204)


@router.get("/sessions/{session_id}/previews", responses=error_responses())
def list_public_previews(session_id: str, app: App, caller: Caller) -> PublicPreviewsOut:
    """The session's public previews, by port (private links are not kept)."""
    found = app.previews.public(caller, session_id)
    return PublicPreviewsOut(previews=[PublicPreviewOut.of(p) for p in found])


DEV_SERVER = "/sessions/{session_id}/dev-server"


STARTING: dict[int | str, dict[str, Any]] = {
    202: {"model": DevServerOut, "description": "Launched, not listening yet"}
}


@router.post(DEV_SERVER, responses={**error_responses(409), **STARTING})
def start_dev_server(
    session_id: str,
    app: App,
    caller: Caller,
    response: Response,
    body: DevServerIn | None = None,
) -> DevServerOut:
    """Detect the project's dev server (or run `command`), install its dependencies when they
    are missing (detached, ahead of the server), launch it detached and wait until its port
    listens: 200 `{port, url, command, logPath, status: "running"}`. Not listening within 20 s:
    202 `status: "starting"` (poll GET; then ask `…/ports/{port}/preview` for a link). 400
    `no_dev_server_found`, or `dev_server_failed` with the tail of its log (the install's or the
    server's); 409 `port_in_use`."""
    given = body or DevServerIn()
    started = app.dev_servers.start(caller, session_id, given.path, given.command, given.port)
    if started.status == "starting":
        response.status_code = 202
    return DevServerOut.of(started)


@router.get(DEV_SERVER, responses=ERRORS)
def dev_server_status(session_id: str, app: App, caller: Caller) -> DevServerOut:
    """What was started and how it is: `status` `running` (its port listens), `starting` (its
    process lives, the port does not listen yet) or `exited` (`logTail` says why); 404 when
    nothing was."""
    return DevServerOut.of(app.dev_servers.status(caller, session_id))


@router.delete(DEV_SERVER, responses=ERRORS)
def stop_dev_server(session_id: str, app: App, caller: Caller) -> DevServerOut:
    """Stop it (its whole process group); 404 when nothing was started."""
    return DevServerOut.of(app.dev_servers.stop(caller, session_id))


CODE_EDITOR = "/sessions/{session_id}/code-editor"


@router.post(CODE_EDITOR, responses=error_responses(409))
def start_code_editor(session_id: str, app: App, caller: Caller) -> DevServerOut:
    """Start code-server in the sandbox (or find it running) and answer a private preview link
    to it; 400 `code_server_missing` says how to get it."""
    return DevServerOut.of(app.code_editor.start(caller, session_id))


@router.get(CODE_EDITOR, responses=ERRORS)
def code_editor_status(session_id: str, app: App, caller: Caller) -> DevServerOut:
    """Whether the editor was started and listens now; 404 when it was not started."""
    return DevServerOut.of(app.code_editor.status(caller, session_id))


@router.delete(CODE_EDITOR, responses=ERRORS)
def stop_code_editor(session_id: str, app: App, caller: Caller) -> DevServerOut:
    """Stop the editor; 404 when it was not started."""
    return DevServerOut.of(app.code_editor.stop(caller, session_id))
