"""Restore: hibernated → restoring (lifecycle) → the provisioning workflow kicked from the
snapshot (provisioning)."""

from __future__ import annotations

from openagents.domain.identity import Identity
from openagents.services.lifecycle import LifecycleService, Resumed
from openagents.services.provisioning import ProvisioningService


class Restore:
    def __init__(self, lifecycle: LifecycleService, provisioning: ProvisioningService) -> None:
        self._lifecycle, self._provisioning = lifecycle, provisioning

    def resume(self, identity: Identity, session_id: str) -> Resumed:
        """A resume: the session ``restoring`` (exactly one of concurrent resumes moves it),
        then its next sandbox generation's start, seeded from the snapshot. A session already
        running (or starting) is left to that."""
        resumed = self._lifecycle.begin_restore(identity, session_id)
        restoring = resumed.session
        if restoring is not None:
            self._provisioning.kick(restoring, restoring.sandbox_generation + 1)
        return resumed
