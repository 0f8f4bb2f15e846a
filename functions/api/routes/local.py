"""One-machine conveniences. They answer 404 in AWS mode (Cognito signs users in there)."""

from __future__ import annotations

from fastapi import APIRouter
from openagents.domain.errors import NotFound
from pydantic import Field

from functions.api.deps import App
from functions.api.schemas import Body, Out

router = APIRouter(prefix="/api/local", tags=["local"])


class TokenIn(Body):
    user: str = Field(min_length=1, max_length=64, pattern=r"^[\w.@-]+$")
    name: str | None = Field(default=None, max_length=200)


class TokenOut(Out):
    token: str
    user: str


@router.post("/token", include_in_schema=False)
def mint_token(body: TokenIn, app: App) -> TokenOut:
    """Sign in locally as any user: the web app's local sign-in (like `openagents token`)."""
    if app.local_tokens is None:
        raise NotFound("Not Found")
    ttl = app.settings.token_ttl_seconds
    return TokenOut(
        token=app.local_tokens.mint(body.user, name=body.name, ttl_seconds=ttl), user=body.user
    )
