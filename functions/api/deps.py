"""Request-scoped dependencies: the container, the caller's identity, the bot check.

They are ``async def``: FastAPI runs a sync dependency in the thread pool, and each hand-off
to a worker thread and back cost more CPU than the check itself (the status poll paid three:
these two and the route). What they do is CPU only (a remembered token, a header check); the
container's one-time build, which may read files and the network, runs in the thread pool. The
one read left on the loop is the CloudFront origin secret, once per execution environment, in
AWS mode only, where Mangum serves one request at a time."""

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from openagents.auth.tokens import identity_from_claims
from openagents.composition import Container
from openagents.domain.errors import Unauthenticated
from openagents.domain.identity import Identity
from starlette.concurrency import run_in_threadpool

BEARER = HTTPBearer(
    auto_error=False, description="A JWT: Cognito in AWS, `openagents token` locally"
)


async def container(request: Request) -> Container:
    """The container; behind CloudFront (AWS) only requests carrying its secret header pass."""
    factory = request.app.state.container
    ready = getattr(factory, "ready", None)
    built: Container = factory() if ready is None or ready() else await run_in_threadpool(factory)
    if built.origin_guard is not None:
        built.origin_guard.check(request.headers)
    return built


async def identity(
    request: Request,
    app: Annotated[Container, Depends(container)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Identity:
    """AWS: the API Gateway JWT authorizer already verified the token; read its claims.
    One machine: verify the HS256 bearer token ourselves."""
    if app.local_tokens is None:
        event: dict[str, Any] = request.scope.get("aws.event") or {}
        claims = event.get("requestContext", {}).get("authorizer", {}).get("jwt", {}).get("claims")
        if not isinstance(claims, dict):
            raise Unauthenticated("Not authenticated")
        return identity_from_claims(claims)
    if bearer is None or not bearer.credentials.strip():
        raise Unauthenticated("Not authenticated")
    return app.local_tokens.verify(bearer.credentials.strip())


async def human_check(
    request: Request,
    app: Annotated[Container, Depends(container)],
    caller: Annotated[Identity, Depends(identity)],
) -> Identity:
    app.bot_policy.check(caller, request.headers)
    return caller


ANONYMOUS = Identity(user_id="")  # the public share-link routes carry no token


async def public_check(request: Request, app: Annotated[Container, Depends(container)]) -> None:
    """Public routes: no authentication, but the same bot check as a person's requests."""
    app.bot_policy.check(ANONYMOUS, request.headers)


Caller = Annotated[Identity, Depends(identity)]
CheckedCaller = Annotated[Identity, Depends(human_check)]
App = Annotated[Container, Depends(container)]
