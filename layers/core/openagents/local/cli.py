"""``openagents``: the one-machine runtime's command line."""

from __future__ import annotations

import importlib
import json
import logging
import os
import threading
from typing import Annotated, Any

import typer

from openagents.composition import local_tokens
from openagents.settings import Mode, Settings

cli = typer.Typer(help="Open Agents on AWS: the one-machine runtime.", no_args_is_help=True)
API_FACTORY = "functions.api.app:create_app"


def load_app(settings: Settings) -> Any:
    """The API app by name, the same way every Lambda task is resolved (no import of
    ``functions`` from this package)."""
    module, _, factory = API_FACTORY.partition(":")
    return getattr(importlib.import_module(module), factory)(lambda: settings)


@cli.command()
def dev(
    port: Annotated[int | None, typer.Option(help="Port (default OPENAGENTS_PORT or 8000)")] = None,
) -> None:
    """Serve the API on http://127.0.0.1:PORT with DynamoDB on moto; state in OPENAGENTS_HOME."""
    import uvicorn

    from openagents.local.dynamodb import LocalDynamo
    from openagents.local.schedules import Timer, run_schedule
    from openagents.local.spa import mount_spa
    from openagents.local.stepfunctions import LocalStepFunctions

    base = Settings()
    if base.mode is not Mode.LOCAL:
        raise typer.BadParameter("openagents dev runs the local mode only")
    base.home.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    dynamo = LocalDynamo(base.home, base.table_name, base.region)
    dynamo.start()
    machines = LocalStepFunctions(dynamo.endpoint, base.region, base.statemachines_dir).install()
    # Lambda tasks run in this process and read their settings from the environment, as on AWS.
    os.environ.update(
        {
            "OPENAGENTS_HOME": str(base.home.resolve()),
            "OPENAGENTS_DYNAMODB_ENDPOINT": dynamo.endpoint,
            "OPENAGENTS_STEPFUNCTIONS_ENDPOINT": dynamo.endpoint,
            "OPENAGENTS_STATE_MACHINES": json.dumps(machines),
        }
    )
    settings = Settings()
    run_schedule("reconciler", checkAll=True)  # sandboxes of a previous run died with it
    timer = Timer(settings.sweep_seconds)
    timer.start()
    stop = threading.Event()

    def autosave() -> None:
        while not stop.wait(settings.dump_interval_seconds):
            dynamo.dump()

    saver = threading.Thread(target=autosave, name="dynamodb-autosave", daemon=True)
    saver.start()
    app = load_app(settings)
    web = mount_spa(app)
    try:
        url = f"http://127.0.0.1:{port or settings.port}"
        typer.echo(
            f"Open Agents: {url}  (API docs at {url}/docs{'' if web else '; web app not built'})"
        )
        uvicorn.run(app, host="127.0.0.1", port=port or settings.port)
    finally:
        stop.set()
        timer.stop()
        dynamo.stop()


@cli.command()
def token(
    user: Annotated[str, typer.Argument(help="User id (the token's sub and username)")],
    name: Annotated[str | None, typer.Option(help="Display name")] = None,
    ttl: Annotated[int | None, typer.Option(help="Lifetime in seconds")] = None,
    machine: Annotated[bool, typer.Option(help="A client-credentials (automation) token")] = False,
) -> None:
    """Print a bearer token the local server accepts."""
    settings = Settings()
    tokens = local_tokens(settings)
    typer.echo(
        tokens.mint(user, name=name, ttl_seconds=ttl or settings.token_ttl_seconds, machine=machine)
    )


@cli.command()
def openapi() -> None:
    """Print the API's OpenAPI schema (JSON)."""
    schema = load_app(Settings()).openapi()
    typer.echo(json.dumps(schema, indent=2, sort_keys=True))


def main() -> None:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAgents")
    cli()
