"""``openagents``: the one-machine runtime's command line (above the composition root: it starts
the runtime of ``openagents.local`` and builds the container for ``down``)."""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
import warnings
from typing import Annotated, Any

import typer

from openagents.auth.tokens import local_tokens
from openagents.local.server_lock import ServerLock
from openagents.settings import Mode, Settings

cli = typer.Typer(help="Open Agents on AWS: the one-machine runtime.", no_args_is_help=True)
API_FACTORY = "functions.api.app:create_app"
SHUTDOWN_SECONDS = 3  # open requests (long polls) get this long after Ctrl-C or SIGTERM
KEPT_RUNNING = (
    "Sandboxes keep running and the next `openagents dev` re-adopts them; "
    "`openagents down` hibernates them all (a verified snapshot, then stop)."
)


def load_app(settings: Settings) -> Any:
    """The API app by name, the same way every Lambda task is resolved (no import of
    ``functions`` from this package)."""
    module, _, factory = API_FACTORY.partition(":")
    return getattr(importlib.import_module(module), factory)(lambda: settings)


@cli.command()
def dev(
    port: Annotated[int | None, typer.Option(help="Port (default OPENAGENTS_PORT or 8000)")] = None,
) -> None:
    """Serve the API on http://127.0.0.1:PORT on the SQLite store (OPENAGENTS_STORE=dynamodb:
    moto's DynamoDB); state in OPENAGENTS_HOME."""
    import uvicorn

    from openagents.local.schedules import Timer, run_schedule
    from openagents.local.spa import mount_spa
    from openagents.local.stepfunctions import LocalStepFunctions

    base = Settings()
    if base.mode is not Mode.LOCAL:
        raise typer.BadParameter("openagents dev runs the local mode only")
    base.home.mkdir(parents=True, exist_ok=True)
    lock = ServerLock(base.home)
    if not lock.acquire():
        holder = lock.holder()
        running = f" (pid {holder.pid}, port {holder.port})" if holder else ""
        raise typer.BadParameter(
            f"{lock.path} is held: a server (or `openagents down`) runs on this home{running}"
        )
    lock.announce(port or base.port)
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # a task or turn invocation that counted nothing is normal here (Powertools warns each time)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    moto, dynamo = start_moto(base)
    machines = LocalStepFunctions(moto.endpoint, base.region, base.statemachines_dir).install()
    # Lambda tasks run in this process and read their settings from the environment, as on AWS.
    os.environ.update(
        {
            "OPENAGENTS_HOME": str(base.home.resolve()),
            "OPENAGENTS_STEPFUNCTIONS_ENDPOINT": moto.endpoint,
            "OPENAGENTS_STATE_MACHINES": json.dumps(machines),
            **({"OPENAGENTS_DYNAMODB_ENDPOINT": moto.endpoint} if dynamo else {}),
        }
    )
    # EMF metrics belong to Lambda's log stream; printed here they are JSON noise every minute
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    settings = Settings()
    drainer = start_drainer(settings) if dynamo is None else start_stream_drain(settings, moto)
    # every run of a previous process died with it, its sandboxes did not: re-adopt, reboot
    # on their own volume or restore, and start every lifecycle run again (docs/sandboxes.md)
    run_schedule("reconciler", checkAll=True)
    timer = Timer(settings.sweep_seconds)
    timer.start()
    stop = threading.Event()

    def autosave(dynamo: Any) -> None:
        while not stop.wait(settings.dump_interval_seconds):
            dynamo.dump()

    if dynamo is not None:  # SQLite commits durably: nothing to save
        threading.Thread(target=autosave, args=(dynamo,), name="autosave", daemon=True).start()
    app = load_app(settings)
    # agent turns run on the durable SDK's local runtime (openagents/local/agent_runtime.py);
    # turns a previous process left running carry on from their last durable checkpoint
    if interrupted := app.state.container().agent.recover():
        typer.echo(f"Agent: {interrupted} turn(s) the restart interrupted carry on")
    web = mount_spa(app)
    try:
        # localhost, not 127.0.0.1: a preview (<port>-<session>.localhost) is same-site with
        # it, so the web app's embedded preview gets its cookie
        url = f"http://localhost:{port or settings.port}"
        typer.echo(
            f"Open Agents: {url}  (API docs at {url}/docs{'' if web else '; web app not built'})"
        )
        typer.echo(f"Sandboxes: {sandbox_confinement(settings)}")
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port or settings.port,
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,
            access_log=False,  # the API logs each request itself (one line, its correlation id)
        )
        typer.echo(KEPT_RUNNING)
    finally:
        stop.set()
        timer.stop()
        if drainer is not None:
            drainer.stop()
        moto.stop()
        lock.release()
    # what is in flight (a turn's step waiting on its command, a task) is durable and carries
    # on at the next start: the process ends now instead of joining the threads that run it
    _exit_now()


def _exit_now() -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@cli.command()
def down(
    timeout: Annotated[int, typer.Option(help="Seconds to wait for the server to stop")] = 30,
) -> None:
    """Hibernate every running sandbox of OPENAGENTS_HOME (a verified snapshot, then stop) and
    stop its server if one runs: the machine back, the work kept. Exit 0 when all are."""
    from openagents.composition import build

    settings = Settings()
    if settings.mode is not Mode.LOCAL:
        raise typer.BadParameter("openagents down runs the local mode only")
    lock = ServerLock(settings.home)
    if lock.holder() is not None:
        typer.echo("Stopping the server …")
    if not lock.take_over(timeout):
        typer.echo(f"the server on {settings.home.resolve()} did not stop", err=True)
        raise typer.Exit(1)
    try:
        logging.basicConfig(level=logging.WARNING)
        container = build(settings, LoggedMetrics())
        done = container.lifecycle.hibernate_all()
    finally:
        lock.release()
    typer.echo(f"Hibernated {len(done.hibernated)} session(s)")
    if done.stopped:
        typer.echo(f"Stopped {len(done.stopped)} sandbox(es) no session runs")
    for session_id, why in done.failed.items():
        typer.echo(f"Session {session_id} not hibernated: {why}", err=True)
    if done.left:
        typer.echo(f"Still running: {', '.join(done.left)}", err=True)
    if done.failed or done.left:
        raise typer.Exit(1)


class LoggedMetrics:
    """The one-machine metric sink: a log line per count."""

    def count(self, name: str, value: int = 1) -> None:
        logging.getLogger("openagents.metrics").info("%s +%d", name, value)


def sandbox_confinement(settings: Settings) -> str:
    """What isolates a sandbox on this machine, in one line (warnings logged for what's
    missing: bubblewrap, slirp4netns, nftables, root for cgroups and the disk cap)."""
    from openagents.composition import local_driver

    driver = local_driver(settings, b"-")
    try:
        return "; ".join(f"{name} {value}" for name, value in driver.confinement.items())
    finally:
        driver.close()


def start_drainer(settings: Settings) -> Any:
    """The SQLite outbox's background drain to the local bus: at once, what a previous run
    committed but never published; then whatever a failed publish left behind."""
    from openagents.events.local import LocalBus
    from openagents.local.rules import local_rules
    from openagents.store.sqlite_outbox import Outbox, OutboxDrainer
    from openagents.store.sqlite_schema import Database

    bus = LocalBus(settings.home / "events.jsonl", rules=local_rules(settings))
    drainer = OutboxDrainer(Outbox(Database(settings.sqlite_path), bus.publish))
    drainer.start()
    return drainer


def start_stream_drain(settings: Settings, moto: Any) -> Any:
    """moto's table has no pipe: its stream drained to the local bus the way the pipe does."""
    import boto3

    from openagents.events.local import LocalBus
    from openagents.local.dynamodb_outbox import StreamDrain
    from openagents.local.rules import local_rules

    endpoint = {
        "endpoint_url": moto.endpoint,
        "region_name": settings.region,
        "aws_access_key_id": "local",
        "aws_secret_access_key": "local",
    }
    bus = LocalBus(settings.home / "events.jsonl", rules=local_rules(settings))
    drain = StreamDrain(
        boto3.client("dynamodb", **endpoint),
        boto3.client("dynamodbstreams", **endpoint),
        settings.table_name,
        bus.publish,
    )
    drain.start()
    return drain


def start_moto(settings: Settings) -> tuple[Any, Any]:
    """moto's server for Step Functions; with ``OPENAGENTS_STORE=dynamodb`` its DynamoDB too
    (the table reloaded from the dump), returned second. With SQLite, an old dump is imported
    once."""
    from openagents.local.dynamodb import LocalDynamo, LocalMoto, import_dump

    if settings.store_adapter == "dynamodb":
        dynamo = LocalDynamo(settings.home, settings.table_name, settings.region)
        dynamo.start()
        return dynamo, dynamo
    import_dump(settings.home, settings.sqlite_path)
    moto = LocalMoto()
    moto.start()
    return moto, None


@cli.command()
def token(
    user: Annotated[str, typer.Argument(help="User id (the token's sub and username)")],
    name: Annotated[str | None, typer.Option(help="Display name")] = None,
    ttl: Annotated[int | None, typer.Option(help="Lifetime in seconds")] = None,
    machine: Annotated[bool, typer.Option(help="A client-credentials (automation) token")] = False,
) -> None:
    """Print a bearer token the server on OPENAGENTS_HOME accepts (which secret signed it, and
    whether a server runs there, on stderr)."""
    settings = Settings()
    secret = settings.jwt_secret_path.resolve()
    existed = secret.exists()
    tokens = local_tokens(settings)
    holder = ServerLock(settings.home).holder()
    typer.echo(
        f"Signed with {secret}{'' if existed else ' (a new secret, created now)'}; "
        + (
            f"the server on port {holder.port} (pid {holder.pid}) uses it"
            if holder
            else f"no server runs on {settings.home.resolve()}: a server started with another "
            "OPENAGENTS_HOME refuses this token"
        ),
        err=True,
    )
    typer.echo(
        tokens.mint(user, name=name, ttl_seconds=ttl or settings.token_ttl_seconds, machine=machine)
    )


@cli.command()
def openapi() -> None:
    """Print the API's OpenAPI schema (JSON)."""
    schema = load_app(Settings()).openapi()
    typer.echo(json.dumps(schema, indent=2, sort_keys=True))


@cli.command("event-schemas")
def event_schemas(
    out: Annotated[str, typer.Option(help="The folder of the schema files")] = "docs/events",
) -> None:
    """Write the events' JSON Schemas (one per detail-type) generated from the event models."""
    from pathlib import Path

    from openagents.events.schemas import write

    for name in write(Path(out)):
        typer.echo(f"wrote {out}/{name}")


@cli.command("migrate-table")
def migrate_table(
    copy_only: Annotated[
        bool, typer.Option(help="Copy to the new keys only, delete nothing yet")
    ] = False,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Sessions migrated at once")] = 8,
) -> None:
    """Move a DynamoDB table written before chat and message ids became per user to the new
    keys (OPENAGENTS_TABLE_NAME, OPENAGENTS_REGION; AWS credentials). Run once after deploying
    that version; idempotent: a second run changes nothing."""
    from openagents.store.dynamodb_migrate import migrate_table as migrate

    settings = Settings()
    report = migrate(
        settings.table_name,
        settings.region,
        settings.dynamodb_endpoint,
        delete_old=not copy_only,
        workers=workers,
    )
    typer.echo(f"Table {settings.table_name} ({settings.region}):")
    for line in report.lines():
        typer.echo(f"  {line}")
    typer.echo(f"Items changed: {report.changed}")


def main() -> None:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAgents")
    cli()
