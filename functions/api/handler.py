"""Lambda entry point: API Gateway HTTP API (payload v2) -> Mangum -> FastAPI.

Two cold-start cuts come before the imports (docs/benchmarks.md, "Cold start (issue 26)"):

- the garbage collector is off while the app is imported and built: the import allocates
  hundreds of thousands of objects and frees almost none, so the collector's passes over them
  are wasted (~15% of the import's CPU). It is switched on again below, with everything the
  import made frozen (``gc.freeze``: kept out of later collections; it lives as long as the
  execution environment anyway).
- ``pydantic.v1`` is marked absent: FastAPI asks ``from pydantic import v1`` for every route
  parameter and response to detect pydantic v1 models (``fastapi/_compat/shared.py``), which
  imports that whole package (~25 ms); the API has no v1 model and none of the function's
  dependencies imports it, so the check answers "not v1" at once.
"""

from __future__ import annotations

import gc
import sys

gc.disable()
sys.modules.setdefault("pydantic.v1", None)  # type: ignore[arg-type]  # None: "not importable"

from typing import Any  # noqa: E402

from aws_lambda_powertools import Logger  # noqa: E402
from aws_lambda_powertools.logging import correlation_paths  # noqa: E402
from aws_lambda_powertools.utilities.typing import LambdaContext  # noqa: E402
from mangum import Mangum  # noqa: E402
from openagents.observability import traced  # noqa: E402

from functions.api.app import SERVICE, create_app  # noqa: E402

logger = Logger(service=SERVICE)
asgi = Mangum(create_app(logger=logger), lifespan="off")
gc.freeze()
gc.enable()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced(SERVICE)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response: dict[str, Any] = asgi(event, context)  # type: ignore[arg-type]
    return response
