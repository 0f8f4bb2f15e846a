"""The sandbox lifecycle (``LifecycleService``): the wait-then-hibernate loop's steps
(``lifecycle_steps.py``), the API's operations (``lifecycle_api.py``: pause, status,
activity, extend, a resume's first step) and the reconciler (``lifecycle_reconciler.py``), on
the shared part of ``lifecycle_base.py``. Every move goes through ``Transitions`` with its audit
entry. It calls no other service, but for the reconciler's re-kicks of sandbox starts
through its port (``SandboxStarts``); the flows that span services are ``services/flows/``."""

from __future__ import annotations

from openagents.services.lifecycle_api import Activity, LifecycleApi, Resumed, StatusView
from openagents.services.lifecycle_base import MACHINE, SandboxStarts
from openagents.services.lifecycle_reconciler import Down, Reconciled, Reconciler
from openagents.services.lifecycle_steps import Action, Decision, SnapshotFailed, kill_commands

__all__ = [
    "MACHINE",
    "Action",
    "Activity",
    "Decision",
    "Down",
    "LifecycleService",
    "Reconciled",
    "Resumed",
    "SandboxStarts",
    "SnapshotFailed",
    "StatusView",
    "kill_commands",
]


class LifecycleService(LifecycleApi, Reconciler):
    """One session's lifecycle, as the composition root builds it: the API's operations, the
    workflow's steps and the reconciler over the same ports."""
