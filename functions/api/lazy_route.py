"""Routes analysed on first use. FastAPI's ``APIRoute`` analyses its endpoint when it is made:
every parameter and dependency (``get_dependant``), the body, the response model and every
declared response model (a pydantic ``TypeAdapter`` each). For the API's routes that was ~18% of
the handler's import, for routes a Lambda execution environment may never serve. An
``AnalysedRoute`` keeps only what routing reads (path, its regex and converters, methods, name,
endpoint) and runs ``APIRoute.__init__`` itself, unchanged, the first time anything else is read:
its handler, its dependant (the first request it matches), or its OpenAPI fields (the first
``/openapi.json``). What it then holds is exactly what an ``APIRoute`` holds
(``tests/unit/test_api_cold_start.py``); the OpenAPI document is the same bytes
(``tests/unit/test_openapi_doc.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import compile_path, get_name

# What APIRoute.__init__ sets beyond the eager attributes: reading one of these analyses the
# route; any other missing attribute is missing (``getattr(route, "original_router", None)``).
DEFERRED = frozenset(APIRoute.__annotations__) | {"app", "form_limits"}


class AnalysedRoute(APIRoute):
    """An ``APIRoute`` whose analysis waits for the first read of what it computes."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        # the eager attributes, as APIRoute computes them (routing matches on these alone)
        self.path = path
        self.endpoint = endpoint
        name = options.get("name")
        self.name = get_name(endpoint) if name is None else name
        self.path_regex, self.path_format, self.param_convertors = compile_path(path)
        methods = options.get("methods")
        self.methods = {method.upper() for method in (["GET"] if methods is None else methods)}
        self._analysis = threading.RLock()  # a server's threads may read a route at once
        # how it was made (kept: a route module's routes are shared by every app in a process)
        self._made: tuple[str, Callable[..., Any], dict[str, Any]] = (path, endpoint, options)
        self._pending = True

    def analyse(self) -> None:
        """Run APIRoute's analysis now, once (a no-op afterwards). Another thread reading the
        route meanwhile waits for it; a read during the analysis itself finds nothing to build."""
        with self.__dict__["_analysis"]:
            if not self.__dict__.get("_pending"):
                return
            self._pending = False
            try:
                path, endpoint, options = self._made
                APIRoute.__init__(self, path, endpoint, **options)
            except BaseException:
                self._pending = True
                raise

    def __getattr__(self, name: str) -> Any:
        # only called for an attribute not set (yet)
        if name not in DEFERRED or "_analysis" not in self.__dict__:
            raise AttributeError(name)
        self.analyse()
        return object.__getattribute__(self, name)
