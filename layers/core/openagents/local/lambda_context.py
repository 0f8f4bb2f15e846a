"""A Lambda context for handlers invoked in-process by the one-machine runtime."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class LocalLambdaContext:
    function_name: str
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    log_group_name: str = "local"
    log_stream_name: str = "local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000
