"""The route table: which function answers each method and path (and /health)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .bundle import git_archive, git_bundle, git_bundle_restore
from .checkpoints import git_checkpoint, git_revert
from .diff import git_diff
from .errors import ApiError, JsonObject
from .exec_stream import exec_route
from .files import list_files, read_file, write_file
from .git import git_branch, git_status
from .ports import TUNNEL_ROUTE, list_ports, tunnel
from .prepare import prepare_workspace
from .push import git_commit, git_remote, git_upstream
from .request import Request, Route
from .restore import restore
from .snapshot import MANIFEST_ROUTE, get_manifest, snapshot, sync

if TYPE_CHECKING:
    from .app import App


PROTOCOL_VERSION = 1


def health(app: App, request: Request) -> JsonObject:
    return {"ok": True, "version": PROTOCOL_VERSION, "workspace": str(app.workspace.root)}


ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/health"): health,
    ("POST", "/exec"): exec_route,
    ("GET", "/files"): list_files,
    ("GET", "/files/content"): read_file,
    ("PUT", "/files/content"): write_file,
    ("POST", "/workspace/prepare"): prepare_workspace,
    ("GET", "/git/branch"): git_branch,
    ("GET", "/git/status"): git_status,
    ("GET", "/git/diff"): git_diff,
    ("POST", "/git/checkpoint"): git_checkpoint,
    ("POST", "/git/revert"): git_revert,
    ("GET", "/git/remote"): git_remote,
    ("POST", "/git/commit"): git_commit,
    ("POST", "/git/upstream"): git_upstream,
    ("POST", "/git/archive"): git_archive,
    ("POST", "/git/bundle"): git_bundle,
    ("POST", "/git/bundle/restore"): git_bundle_restore,
    ("POST", "/snapshot"): snapshot,
    ("POST", "/restore"): restore,
    ("POST", "/sync"): sync,
    ("GET", "/ports"): list_ports,
}


def find_route(method: str, path: str) -> Route:
    route = ROUTES.get((method, path))
    if route is not None:
        return route
    if method == "GET" and MANIFEST_ROUTE.match(path):
        return get_manifest
    if method == "GET" and TUNNEL_ROUTE.fullmatch(path):
        return tunnel
    if any(known_path == path for _, known_path in ROUTES):
        raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}")
    raise ApiError(404, "not_found", f"no such endpoint: {method} {path}")
