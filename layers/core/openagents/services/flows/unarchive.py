"""Unarchive: back to running (archive) → the next sandbox's start kicked (provisioning), or,
when its sandbox still runs, the idle loop (lifecycle)."""

from __future__ import annotations

import logging

from openagents.domain.models import LifecycleState, Session
from openagents.services.archive import ArchiveService
from openagents.services.lifecycle import LifecycleService
from openagents.services.provisioning import ProvisioningService

log = logging.getLogger(__name__)


class Unarchive:
    def __init__(
        self,
        archive: ArchiveService,
        provisioning: ProvisioningService,
        lifecycle: LifecycleService,
    ) -> None:
        self._archive, self._provisioning, self._lifecycle = archive, provisioning, lifecycle

    def unarchive(self, session: Session) -> Session:
        """The session running again; a session that is not archived is left as it is."""
        unarchived = self._archive.unarchive(session)
        if unarchived is None:
            return session
        if unarchived.lifecycle_state is LifecycleState.ACTIVE:  # nothing saved: it still runs
            self._lifecycle.kick(unarchived, "unarchived", force=True)
            return unarchived
        try:  # a start from the bundle (or the snapshot)
            self._provisioning.kick(unarchived, unarchived.sandbox_generation + 1)
        except Exception as exc:  # POST /api/sandbox kicks again
            log.warning("provisioning kick after unarchive of %s failed: %s", session.id, exc)
        return unarchived
