"""CDK entry point: ``python -m infra.app`` (what ``cdk.json`` runs). Synth needs no AWS
credentials and no Docker; the assets come from ``make build`` (``infra/build.py``)."""

from __future__ import annotations

from aws_cdk import App

from infra import nag
from infra.config import StageConfig
from infra.stack import OpenAgentsStack


def compose(app: App) -> OpenAgentsStack:
    """Build the stack for the stage the context describes, with the cdk-nag gate attached."""
    config = StageConfig.from_context(app.node)
    stack = OpenAgentsStack(app, config.stack_name, config=config)
    nag.add_checks(app)
    return stack


def main() -> None:
    app = App()
    compose(app)
    app.synth()


if __name__ == "__main__":
    main()
