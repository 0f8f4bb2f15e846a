"""The error answer ``{"error": message, "code": code}`` with its HTTP status."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]


class ApiError(Exception):
    """An error answered as ``{"error": message, "code": code}`` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_request(message: str, code: str = "bad_request") -> ApiError:
    return ApiError(400, code, message)


def outside_workspace(path: str) -> ApiError:
    return bad_request(f"path is outside the workspace: {path!r}", "path_outside_workspace")


def not_found(path: str) -> ApiError:
    return ApiError(404, "not_found", f"no such file or directory: {path!r}")
