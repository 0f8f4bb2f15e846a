"""The fields of a request body or query, checked (400 naming the field when one is wrong)."""

from __future__ import annotations

from typing import Any

from .errors import JsonObject, bad_request


def required_str(body: JsonObject, name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise bad_request(f"{name} must be a non-empty string")
    return value


def optional_str(body: JsonObject, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"{name} must be a string or null")
    return value


def optional_bool(body: JsonObject, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise bad_request(f"{name} must be a boolean")
    return value


def bounded_number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad_request(f"{name} must be a number between {low:g} and {high:g}")
    return float(value)


def bounded_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise bad_request(f"{name} must be an integer") from None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"{name} must be an integer between {low} and {high}")
    return value


def single_line(value: str, name: str) -> str:
    if any(character in value for character in "\x00\r\n"):
        raise bad_request(f"{name} must be a single line")
    return value
