"""sandboxd's log: one JSON line per event on stderr (never a token or a request body)."""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from typing import Any

_log_lock = threading.Lock()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log(level: str, event: str, **fields: Any) -> None:
    """One JSON line on stderr. Callers never pass tokens or request bodies."""
    line = json.dumps({"ts": now_iso(), "level": level, "event": event, **fields}, default=str)
    with _log_lock:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
