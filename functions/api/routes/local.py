"""One-machine conveniences. They answer 404 in AWS mode (Cognito signs users in there), and
403 to a client that is not on this machine (a loopback address)."""

from fastapi import APIRouter, Depends, Request
from openagents.domain.errors import AccessDenied, NotFound
from pydantic import Field

from functions.api.deps import App
from functions.api.hosts import is_loopback
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import Body, Out
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/local",
    tags=["local"],
    dependencies=[Depends(known_query)],
)


class TokenIn(Body):
    user: str = Field(min_length=1, max_length=64, pattern=r"^[\w.@-]+$")
    name: str | None = Field(default=None, max_length=200)


class TokenOut(Out):
    token: str
    user: str


def local_client(request: Request, app: App) -> None:
    """404 in AWS mode; 403 unless the client address is loopback (a client behind a local
    reverse proxy that forwards its address is not). Checked before the body is."""
    if app.local_tokens is None:
        raise NotFound("Not Found")
    if not is_loopback(request.client.host if request.client else None):
        raise AccessDenied("Local sign-in answers only clients on this machine")


@router.post("/token", include_in_schema=False, dependencies=[Depends(local_client)])
def mint_token(body: TokenIn, app: App) -> TokenOut:
    """Sign in locally as any user: the web app's local sign-in (like `openagents token`)."""
    if app.local_tokens is None:
        raise NotFound("Not Found")
    ttl = app.settings.token_ttl_seconds
    return TokenOut(
        token=app.local_tokens.mint(body.user, name=body.name, ttl_seconds=ttl), user=body.user
    )
