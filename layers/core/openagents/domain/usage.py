"""Tokens of a model call, and of a run (their sum): the model port's vocabulary, which the run
store keeps and the API shows — so it lives here, under both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    """Tokens of one model call. ``input_tokens`` excludes cached input: the prompt is
    input + cache_read + cache_write tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_json(self) -> dict[str, int]:
        """The API's shape: ``{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}``."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Usage:
        def number(key: str) -> int:
            value = data.get(key, 0)
            return int(value) if isinstance(value, int | float | str) else 0

        return cls(
            number("inputTokens"),
            number("outputTokens"),
            number("cacheReadTokens"),
            number("cacheWriteTokens"),
        )
