"""Serve the built web app (``web/dist``) from the local server, with SPA fallback routing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIST = Path(__file__).resolve().parents[4] / "web" / "dist"


class SpaFiles(StaticFiles):
    """Static files; an unknown path that is not under /api gets index.html (client routes).
    A path under /api that no route matched is the API's JSON 404, whatever the method."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path == "api" or path.startswith("api/"):
            raise HTTPException(404)
        try:
            return await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404:
                raise
            return await super().get_response("index.html", scope)


def mount_spa(app: Any, dist: Path = WEB_DIST) -> bool:
    """Mount the SPA at / when it has been built; False (API only) otherwise."""
    if not (dist / "index.html").exists():
        return False
    app.mount("/", SpaFiles(directory=dist, html=True), name="web")
    return True
