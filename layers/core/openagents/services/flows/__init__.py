"""The flows that span services, each written down as its steps in order. The services know
nothing of one another: each exposes its own step, and a flow (built by the composition root
after the services) calls them in turn. The entry points call the flow.

- **After a turn** (``after_turn.py``, ``AfterTurn``): a natural finish releases the turn's hold
  on hibernation (lifecycle), commits and pushes the work and opens or syncs its PR
  (auto-commit: one ``sandbox.auto_commit`` entry per run), then kicks the idle loop
  (lifecycle), whose due moved earlier. The agent's follow-ups (``AgentHost.ended``) and
  ``POST /api/sandbox/activity {turn: "end"}`` run it.
- **Restore** (``restore.py``, ``Restore``): a resume moves the hibernated session to
  ``restoring`` (lifecycle), then kicks the provisioning workflow seeded from its snapshot
  (provisioning). ``PUT /api/sandbox/snapshot`` and a message to a hibernated session run it.
- **Sandbox ready** (``sandbox_ready.py``, ``SandboxReady``): the provisioning workflow's
  prepare step — the workspace, from the archive's bundle when the session has one (provisioning
  answers ``FromBundle``, archive restores it) — and its activate step: the session active
  (provisioning), the idle loop kicked (lifecycle), the dev server and code editor started
  again (on a thread on one machine; inline on Lambda, whose threads freeze when it returns).
  ``functions/provisioner/`` runs both.
- **Unarchive** (``unarchive.py``, ``Unarchive``): the session back to running (archive), then
  its next sandbox's start kicked (provisioning), or, when its sandbox still runs, the idle loop
  (lifecycle). ``PATCH /api/sessions/{id}`` with ``status: running`` runs it
  (``SessionService``).

Hibernation is the lifecycle's own loop (``lifecycle_steps.py``) and archive's finalisation
follows its event (``functions/archiver/``): neither calls another service. The reconciler's
rescues kick a start through its own port (``lifecycle_base.SandboxStarts``: provisioning).
"""

from openagents.services.flows.after_turn import AfterTurn
from openagents.services.flows.restore import Restore
from openagents.services.flows.sandbox_ready import SandboxReady
from openagents.services.flows.unarchive import Unarchive

__all__ = ["AfterTurn", "Restore", "SandboxReady", "Unarchive"]
