"""AWS clients built on first use. Creating a boto3 client imports boto3 and loads its service
model, endpoint rules and credential chain: tens of milliseconds each, which a cold start pays
only on the paths that call that service (a status poll never starts a workflow)."""

from __future__ import annotations

import threading
from typing import Any

# boto3's default session is not safe to create clients from two threads at once
_CREATING = threading.Lock()


class LazyClient:
    """Stands for ``boto3.client(service, ...)``: every attribute is the real client's, which
    the first attribute read creates."""

    def __init__(self, service: str, region: str | None, endpoint: str | None = None) -> None:
        self._service = service
        self._region = region
        self._endpoint = endpoint
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            with _CREATING:
                if self._client is None:
                    import boto3

                    self._client = boto3.client(  # type: ignore[call-overload]
                        self._service, region_name=self._region, endpoint_url=self._endpoint
                    )
        return getattr(self._client, name)
