"""Unknown query parameters are refused: 400 naming the parameter, as an unknown body field is
(bodies forbid extra fields). A typo such as ``?curser=`` would otherwise be ignored silently and
answer as if it were not there."""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from openagents.domain.errors import InvalidInput

KNOWN = "openagents_query_names"  # the route's query parameter names, computed once


async def known_query(request: Request) -> None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    names: frozenset[str] | None = getattr(route, KNOWN, None)
    if names is None:
        names = frozenset(_query_names(route.dependant))
        setattr(route, KNOWN, names)
    for key in request.query_params:
        if key not in names:
            raise InvalidInput(f"Unknown query parameter {key!r}", field=key or "query")


def _query_names(dependant: Dependant) -> list[str]:
    """The query parameters a route declares, its dependencies' included."""
    names = [param.alias for param in dependant.query_params]
    for inner in dependant.dependencies:
        names.extend(_query_names(inner))
    return names
