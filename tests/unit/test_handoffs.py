"""The hand-offs between the session services (``services/handoffs.py``): each names the one
service method it calls; none runs before the services are bound, and they are bound once."""

from __future__ import annotations

from typing import Any, cast

import pytest
from openagents.services.handoffs import Handoffs, Services


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            return name

        return call


def _bound() -> tuple[Handoffs, dict[str, Recorder]]:
    services = {name: Recorder() for name in ("lifecycle", "provisioning", "archive")}
    handoffs = Handoffs()
    handoffs.bind(
        Services(
            lifecycle=cast(Any, services["lifecycle"]),
            provisioning=cast(Any, services["provisioning"]),
            archive=cast(Any, services["archive"]),
        )
    )
    return handoffs, services


def test_each_handoff_calls_its_service() -> None:
    handoffs, services = _bound()
    session, handle = cast(Any, "session"), cast(Any, "handle")
    handoffs.provision(session, 3)
    handoffs.sandbox_active(session)
    handoffs.unarchived(session)
    handoffs.restore_workspace(session, handle)
    assert services["provisioning"].calls == [("kick", (session, 3), {})]
    assert services["lifecycle"].calls == [
        ("kick", (session, "sandbox-active"), {}),
        ("kick", (session, "unarchived"), {"force": True}),
    ]
    assert services["archive"].calls == [("restore_workspace", (session, handle), {})]


def test_a_handoff_before_bind_raises() -> None:
    with pytest.raises(RuntimeError, match="before the services were bound"):
        Handoffs().sandbox_active(cast(Any, "session"))


def test_the_services_are_bound_once() -> None:
    handoffs, _ = _bound()
    with pytest.raises(RuntimeError, match="bound once"):
        handoffs.bind(cast(Any, None))
