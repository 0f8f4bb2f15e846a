"""A GitHub-shaped server on 127.0.0.1 for tests: the REST routes the control plane calls
(repositories, pull requests, merges, combined statuses, check runs, annotations, Actions job
logs answered by a redirect to a storage URL) plus git's smart HTTP on the same port
(``tests/git_http_server.py``'s ``git http-backend``), over the bare repositories under
``root`` (``/<owner>/<name>.git``). REST wants ``Authorization: Bearer <token>``, git basic
auth ``x-access-token:<token>``; the storage URL wants no credentials and records any it gets.
Pull requests read their head from the bare repository, as GitHub's do."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from tests.git_http_server import GitHttpServer, _Handler

Json = dict[str, Any]


@dataclass
class GitHubState(GitHttpServer):
    pulls: dict[tuple[str, str], list[Json]] = field(default_factory=dict)
    statuses: dict[str, list[Json]] = field(default_factory=dict)  # by sha
    check_runs: dict[str, list[Json]] = field(default_factory=dict)  # by sha
    annotations: dict[int, list[Json]] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)
    repo_settings: Json = field(default_factory=dict)
    rest: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of REST calls
    storage_auth: list[str | None] = field(default_factory=list)  # Authorization seen there
    lock: threading.Lock = field(default_factory=threading.Lock)

    def head_of(self, owner: str, name: str, branch: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
            cwd=self.root / owner / f"{name}.git", capture_output=True, text=True, check=False,
        )  # fmt: skip
        return done.stdout.strip() or None

    def add_check(
        self, sha: str, name: str, status: str, conclusion: str | None, log: str = ""
    ) -> int:
        with self.lock:
            runs = self.check_runs.setdefault(sha, [])
            check_id = 1000 + sum(len(v) for v in self.check_runs.values())
            runs.append(
                {
                    "id": check_id,
                    "name": name,
                    "status": status,
                    "conclusion": conclusion,
                    "html_url": f"{self.url}/checks/{check_id}",
                    "output": {"title": f"{name} {conclusion or status}", "summary": ""},
                }
            )
            if log:
                self.logs[check_id] = log
            return check_id


PULL = re.compile(r"^/repos/([^/]+)/([^/]+)/pulls/(\d+)(/merge)?$")


class _GitHubHandler(_Handler):
    server_state: ClassVar[GitHubState]

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def _route(self, method: str) -> None:
        path = urlsplit(self.path).path
        if ".git/" in path:
            self._serve()
            return
        state = self.server_state
        if path.startswith("/_storage/logs/"):
            state.storage_auth.append(self.headers.get("Authorization"))
            text = state.logs.get(int(path.rsplit("/", 1)[1]))
            self._raw(200 if text is not None else 404, (text or "").encode(), "text/plain")
            return
        state.rest.append((method, path))
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            self._json(401, {"message": "Bad credentials"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        with state.lock:
            status, answer, headers = self._rest(method, path, query, body)
        if headers.get("Location"):
            self.send_response(status)
            self.send_header("Location", headers["Location"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._json(status, answer)

    def _rest(  # noqa: C901 - one router for a fake server's routes, read top to bottom
        self, method: str, path: str, query: dict[str, str], body: Json
    ) -> tuple[int, Any, dict[str, str]]:
        state = self.server_state
        parts = path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "repos":
            return 404, {"message": "Not Found"}, {}
        owner, name, rest = parts[1], parts[2], parts[3:]
        if not (state.root / owner / f"{name}.git").is_dir():
            return 404, {"message": "Not Found"}, {}
        pulls = state.pulls.setdefault((owner, name), [])
        if not rest and method == "GET":
            return 200, {"default_branch": "main", **state.repo_settings}, {}
        if rest == ["pulls"] and method == "GET":
            head = query.get("head", "").split(":", 1)[-1]
            found = [p for p in pulls if not head or p["head"]["ref"] == head]
            if query.get("state", "open") != "all":
                found = [p for p in found if p["state"] == query.get("state", "open")]
            if query.get("base"):
                found = [p for p in found if p["base"]["ref"] == query["base"]]
            return 200, [self._fresh(owner, name, p) for p in reversed(found)], {}
        if rest == ["pulls"] and method == "POST":
            return self._create(owner, name, pulls, body)
        match = PULL.match(path)
        if match:
            number = int(match.group(3))
            pull = next((p for p in pulls if p["number"] == number), None)
            if pull is None:
                return 404, {"message": "Not Found"}, {}
            if match.group(4) and method == "PUT":
                if pull["state"] != "open":
                    return 405, {"message": "Pull Request is not mergeable"}, {}
                pull.update(state="closed", merged=True, merged_at="2026-01-01T00:00:00Z")
                return 200, {"merged": True, "message": "Pull Request successfully merged"}, {}
            if method == "PATCH":
                pull.update({k: v for k, v in body.items() if k in ("state", "title", "body")})
            return 200, self._fresh(owner, name, pull), {}
        if len(rest) == 3 and rest[0] == "commits" and rest[2] == "status":
            statuses = state.statuses.get(rest[1], [])
            combined = "success" if all(s["state"] == "success" for s in statuses) else "pending"
            return 200, {"state": combined, "statuses": statuses}, {}
        if len(rest) == 3 and rest[0] == "commits" and rest[2] == "check-runs":
            runs = state.check_runs.get(rest[1], [])
            return 200, {"total_count": len(runs), "check_runs": runs}, {}
        if rest[:1] == ["check-runs"] and len(rest) in (2, 3):
            check_id = int(rest[1])
            run = next(
                (r for runs in state.check_runs.values() for r in runs if r["id"] == check_id),
                None,
            )
            if run is None:
                return 404, {"message": "Not Found"}, {}
            if len(rest) == 3:
                return 200, state.annotations.get(check_id, []), {}
            return 200, run, {}
        if rest[:2] == ["actions", "jobs"] and rest[3:] == ["logs"]:
            job = int(rest[2])
            if job not in state.logs:
                return 404, {"message": "Not Found"}, {}
            return 302, None, {"Location": f"{state.url}/_storage/logs/{job}"}
        return 404, {"message": "Not Found"}, {}

    def _create(
        self, owner: str, name: str, pulls: list[Json], body: Json
    ) -> tuple[int, Any, dict[str, str]]:
        state = self.server_state
        head, base = str(body.get("head")), str(body.get("base"))
        sha = state.head_of(owner, name, head)
        if sha is None or state.head_of(owner, name, base) is None:
            invalid = {"message": "Validation Failed", "errors": [{"message": "head invalid"}]}
            return 422, invalid, {}
        if any(p["head"]["ref"] == head and p["state"] == "open" for p in pulls):
            exists = f"A pull request already exists for {owner}:{head}."
            return 422, {"message": "Validation Failed", "errors": [{"message": exists}]}, {}
        number = len(pulls) + 1
        pull = {
            "number": number,
            "state": "open",
            "merged": False,
            "merged_at": None,
            "draft": bool(body.get("draft")),
            "title": body.get("title"),
            "body": body.get("body"),
            "html_url": f"{state.url}/{owner}/{name}/pull/{number}",
            "head": {"ref": head, "sha": sha},
            "base": {"ref": base},
            "mergeable": True,
            "mergeable_state": "clean",
        }
        pulls.append(pull)
        return 201, pull, {}

    def _fresh(self, owner: str, name: str, pull: Json) -> Json:
        sha = self.server_state.head_of(owner, name, pull["head"]["ref"]) or pull["head"]["sha"]
        return {**pull, "head": {**pull["head"], "sha": sha}}

    def _json(self, status: int, data: Any) -> None:
        self._raw(status, json.dumps(data).encode(), "application/json")

    def _raw(self, status: int, payload: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def github_server(root: Path, token: str) -> Iterator[GitHubState]:
    state = GitHubState(root=root, token=token)
    handler = type("Handler", (_GitHubHandler,), {"server_state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
