"""Events: the domain event bus. Rules, archive and schedules arrive with the code that uses them
(lifecycle, archiver, reconciler)."""

from __future__ import annotations

from aws_cdk import aws_events as events
from constructs import Construct

from infra.config import StageConfig


class Events(Construct):
    def __init__(self, scope: Construct, id: str, *, config: StageConfig) -> None:
        super().__init__(scope, id)
        self.bus = events.EventBus(
            self, "Bus", description=f"Open Agents domain events ({config.stage})"
        )
