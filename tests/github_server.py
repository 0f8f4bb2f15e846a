"""A GitHub-shaped server on 127.0.0.1 for tests: the REST routes the control plane calls
(repositories, pull requests, merges, combined statuses, check runs, annotations, Actions job
logs answered by a redirect to a storage URL) plus git's smart HTTP on the same port
(``tests/git_http_server.py``'s ``git http-backend``), over the bare repositories under
``root`` (``/<owner>/<name>.git``). REST wants ``Authorization: Bearer <token>``, git basic
auth ``x-access-token:<token>``; the storage URL wants no credentials and records any it gets.
Pull requests read their head from the bare repository, as GitHub's do.

The repository picker's routes too: a GitHub App (``app_id`` and its public key: ``/app/*`` and
the installation lookups want its RS256 JWT, verified as GitHub does) with installations on
accounts (``install``), their access-token exchange, ``/installation/repositories`` (an
installation token), ``/user/repos`` (the user token: list and create), ``/orgs/{org}/repos``,
``/orgs/{org}/installation``, ``/repos/{o}/{r}`` and its branches; lists paginate with
``per_page``/``page`` and a ``Link`` header as GitHub's. An installation token reaches only its
installation's repositories (404 elsewhere, as on GitHub)."""

from __future__ import annotations

import json
import math
import re
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt

from tests.git_http_server import GitHttpServer, _Handler

Json = dict[str, Any]
APP_JWT_MAX_SECONDS = 600  # GitHub: exp at most 10 minutes after iat
INSTALLATION_TOKEN_SECONDS = 3600
UNREACHABLE = (
    "There is at least one repository that does not exist or is not accessible to the parent "
    "installation."
)
NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass
class Installation:
    """The App installed on ``account``: every repository of it, or only ``repositories``
    (``owner/name``)."""

    id: int
    account: str
    repositories: tuple[str, ...] | None = None

    def reaches(self, full_name: str) -> bool:
        if self.repositories is not None:
            return full_name.lower() in {r.lower() for r in self.repositories}
        return full_name.split("/", 1)[0].lower() == self.account.lower()


@dataclass(frozen=True)
class _Caller:
    kind: str  # "user" (the token), "installation" (its token), "app" (the App's JWT),
    # "anonymous" (no Authorization: public repositories only, as on GitHub)
    installation: Installation | None = None
    names: frozenset[str] | None = None  # an installation token scoped to these repositories

    def reaches(self, full_name: str, private: bool = True) -> bool:
        if self.kind == "user" or (self.kind == "anonymous" and not private):
            return True
        if self.installation is None or not self.installation.reaches(full_name):
            return False
        return self.names is None or full_name.split("/", 1)[1].lower() in self.names


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
    app_id: str | None = None  # a GitHub App: its JWTs are verified with app_public_key
    app_public_key: Any = None  # PEM (str or bytes) or a cryptography public key
    installations: list[Installation] = field(default_factory=list)
    installation_tokens: dict[str, tuple[int, frozenset[str] | None, float]] = field(
        default_factory=dict
    )  # token -> (installation id, repository names or None for all, expires at)
    user_login: str = "octocat"  # the user token's account: POST /user/repos creates there
    private_repos: set[str] = field(default_factory=set)  # owner/name shown as private
    private_allowed: bool = True  # False: creating a private repository is 422 (the plan)

    def install(self, account: str, repositories: tuple[str, ...] | None = None) -> Installation:
        with self.lock:
            installation = Installation(100 + len(self.installations), account, repositories)
            self.installations.append(installation)
            return installation

    def all_repositories(self) -> list[tuple[str, str]]:
        """(owner, name) of every bare repository served, by full name (ignoring case)."""
        found = [
            (owner.name, repo.name.removesuffix(".git"))
            for owner in self.root.iterdir()
            if owner.is_dir()
            for repo in owner.iterdir()
            if repo.name.endswith(".git") and (repo / "HEAD").is_file()
        ]
        return sorted(found, key=lambda item: f"{item[0]}/{item[1]}".lower())

    def default_branch(self, owner: str, name: str) -> str:
        head = (self.root / owner / f"{name}.git" / "HEAD").read_text().strip()
        return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else "main"

    def branch_names(self, owner: str, name: str) -> list[str]:
        done = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname:short)", "refs/heads"],
            cwd=self.root / owner / f"{name}.git", capture_output=True, text=True, check=True,
        )  # fmt: skip
        return sorted(done.stdout.split())

    def repo_json(self, owner: str, name: str) -> Json:
        full = f"{owner}/{name}"
        orgs = {i.account.lower() for i in self.installations} - {self.user_login.lower()}
        return {
            "id": 10_000 + self.all_repositories().index((owner, name)),
            "name": name,
            "full_name": full,
            "owner": {"login": owner, "type": "Organization" if owner.lower() in orgs else "User"},
            "private": full in self.private_repos,
            "default_branch": self.default_branch(owner, name),
            "html_url": f"{self.url}/{full}",
            "clone_url": f"{self.url}/{full}.git",
        }

    def create_repository(self, owner: str, name: str, *, readme: bool) -> None:
        """A bare repository; with ``readme`` a first commit on main (GitHub's auto_init)."""
        bare = self.root / owner / f"{name}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        if not readme:
            return

        def plumb(*args: str, stdin: str = "") -> str:
            env = {"GIT_AUTHOR_NAME": "GitHub", "GIT_AUTHOR_EMAIL": "noreply@github.com"}
            env |= {"GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": "noreply@github.com"}
            done = subprocess.run(
                ["git", *args], cwd=bare, input=stdin, capture_output=True, text=True,
                check=True, env={**env, "PATH": "/usr/bin:/bin", "HOME": str(self.root)},
            )  # fmt: skip
            return done.stdout.strip()

        blob = plumb("hash-object", "-w", "--stdin", stdin=f"# {name}\n")
        tree = plumb("mktree", stdin=f"100644 blob {blob}\tREADME.md\n")
        commit = plumb("commit-tree", tree, "-m", "Initial commit")
        plumb("update-ref", "refs/heads/main", commit)

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
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        with state.lock:
            caller = self._caller()
            if isinstance(caller, str):
                status, answer, headers = 401, {"message": caller}, dict[str, str]()
            else:
                status, answer, headers = self._answer(method, path, query, body, caller)
        if headers.get("Location"):
            self.send_response(status)
            self.send_header("Location", headers["Location"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._json(status, answer, headers)

    def _caller(self) -> _Caller | str:
        """Who the Authorization header names, or the 401's message."""
        state = self.server_state
        given = self.headers.get("Authorization") or ""
        bearer = given.removeprefix("Bearer ") if given.startswith("Bearer ") else ""
        if not given and self.command == "GET":
            return _Caller("anonymous")
        if bearer and bearer == state.token:
            return _Caller("user")
        if bearer in state.installation_tokens:
            installation_id, names, expires_at = state.installation_tokens[bearer]
            if time.time() >= expires_at:
                return "Bad credentials"
            installation = next(i for i in state.installations if i.id == installation_id)
            return _Caller("installation", installation, names)
        if bearer.count(".") == 2 and state.app_public_key is not None:
            return self._app_caller(bearer)
        return "Bad credentials"

    def _app_caller(self, token: str) -> _Caller | str:
        """The App's JWT, verified as GitHub does: RS256 with the App's public key, issued by
        the App, not expired, at most 10 minutes long."""
        state = self.server_state
        try:
            claims = jwt.decode(
                token,
                state.app_public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=30,
            )
        except jwt.PyJWTError:
            return "A JSON web token could not be decoded"
        if str(claims["iss"]) != str(state.app_id):
            return "Integration not found"
        if int(claims["exp"]) - int(claims["iat"]) > APP_JWT_MAX_SECONDS + 60:
            return "'Expiration time' claim ('exp') is too far in the future"
        return _Caller("app")

    def _answer(
        self, method: str, path: str, query: dict[str, str], body: Json, caller: _Caller
    ) -> tuple[int, Any, dict[str, str]]:
        picked = self._picker(method, path, query, body, caller)
        if picked is not None:
            return picked
        if caller.kind == "app":  # a JWT reaches only the App's own routes
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        parts = path.strip("/").split("/")
        if caller.kind == "anonymous" and parts[:1] != ["repos"]:
            return 401, {"message": "Requires authentication"}, {}
        if parts[:1] == ["repos"] and len(parts) >= 3:
            full = "/".join(parts[1:3])
            if not caller.reaches(full, full in self.server_state.private_repos):
                return 404, {"message": "Not Found"}, {}
        return self._rest(method, path, query, body)

    def _picker(  # noqa: C901 - the picker's routes, read top to bottom
        self, method: str, path: str, query: dict[str, str], body: Json, caller: _Caller
    ) -> tuple[int, Any, dict[str, str]] | None:
        """The App's and the repository picker's routes; None: not one of them."""
        state = self.server_state
        parts = path.strip("/").split("/")
        app_route = parts[:1] == ["app"] or (
            parts[-1:] == ["installation"] and parts[:1] in (["repos"], ["orgs"])
        )
        if app_route and caller.kind != "app":
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        if parts == ["app", "installations"] and method == "GET":
            return self._page(
                path, query, [self._installation_json(i) for i in state.installations]
            )
        if parts[:2] == ["app", "installations"] and parts[3:] == ["access_tokens"]:
            return self._exchange(parts[2], body) if method == "POST" else None
        if parts[-1:] == ["installation"] and method == "GET" and len(parts) in (3, 4):
            account = parts[1]
            found = next(
                (
                    i
                    for i in state.installations
                    if (i.reaches(f"{parts[1]}/{parts[2]}") if len(parts) == 4 else
                        i.account.lower() == account.lower())
                ),
                None,
            )  # fmt: skip
            if found is None:
                return 404, {"message": "Not Found"}, {}
            return 200, self._installation_json(found), {}
        if parts == ["installation", "repositories"] and method == "GET":
            if caller.kind == "anonymous":
                return 401, {"message": "Requires authentication"}, {}
            if caller.kind != "installation":
                return 403, {"message": "Resource not accessible by personal access token"}, {}
            reached = [
                state.repo_json(o, n) for o, n in state.all_repositories()
                if caller.reaches(f"{o}/{n}")
            ]  # fmt: skip
            status, items, headers = self._page(path, query, reached)
            return status, {"total_count": len(reached), "repositories": items}, headers
        if parts == ["user", "repos"]:
            if caller.kind in ("anonymous", "app"):
                return 401, {"message": "Requires authentication"}, {}
            if caller.kind != "user":
                return 403, {"message": "Resource not accessible by integration"}, {}
            if method == "POST":
                return self._create_repository(state.user_login, body)
            every = [state.repo_json(o, n) for o, n in state.all_repositories()]
            return self._page(path, query, every)
        if len(parts) == 3 and parts[0] == "orgs" and parts[2] == "repos" and method == "POST":
            org = parts[1]
            known = {i.account.lower() for i in state.installations}
            if org.lower() not in known and not (state.root / org).is_dir():
                return 404, {"message": "Not Found"}, {}
            if caller.kind == "installation" and not (
                caller.installation and caller.installation.account.lower() == org.lower()
            ):
                return 403, {"message": "Resource not accessible by integration"}, {}
            return self._create_repository(org, body)
        if len(parts) in (3, 4) and parts[0] == "repos" and method == "GET":
            owner, name = parts[1], parts[2]
            if parts[3:] not in ([], ["branches"]):
                return None
            full = f"{owner}/{name}"
            if not (state.root / owner / f"{name}.git").is_dir() or not caller.reaches(
                full, full in state.private_repos
            ):
                return 404, {"message": "Not Found"}, {}
            if parts[3:] == ["branches"]:
                head = {n: state.head_of(owner, name, n) for n in state.branch_names(owner, name)}
                branches = [
                    {"name": n, "commit": {"sha": sha}, "protected": False}
                    for n, sha in head.items()
                ]
                return self._page(path, query, branches)
            return 200, {**state.repo_json(owner, name), **state.repo_settings}, {}
        return None

    def _exchange(self, installation_id: str, body: Json) -> tuple[int, Any, dict[str, str]]:
        state = self.server_state
        installation = next((i for i in state.installations if str(i.id) == installation_id), None)
        if installation is None:
            return 404, {"message": "Not Found"}, {}
        wanted = body.get("repositories")
        names: frozenset[str] | None = None
        if wanted is not None:
            names = frozenset(str(n).lower() for n in wanted)
            reached = {n.lower() for o, n in state.all_repositories()
                       if installation.reaches(f"{o}/{n}")}  # fmt: skip
            if not names <= reached:
                return 422, {"message": UNREACHABLE}, {}
        token = f"ghs_{secrets.token_hex(18)}"
        expires_at = time.time() + INSTALLATION_TOKEN_SECONDS
        state.installation_tokens[token] = (installation.id, names, expires_at)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
        selection = "all" if installation.repositories is None else "selected"
        answer = {
            "token": token,
            "expires_at": stamp,
            "permissions": body.get("permissions") or {"contents": "write"},
            "repository_selection": selection,
        }
        return 201, answer, {}

    def _create_repository(self, owner: str, body: Json) -> tuple[int, Any, dict[str, str]]:
        state = self.server_state
        name = body.get("name")
        failed = "Repository creation failed."
        if not isinstance(name, str) or not name:
            missing = {"resource": "Repository", "code": "missing_field", "field": "name"}
            return 422, {"message": failed, "errors": [missing]}, {}
        if not NAME.match(name):
            invalid = {"resource": "Repository", "code": "invalid", "field": "name"}
            return 422, {"message": failed, "errors": [invalid]}, {}
        if any(o.lower() == owner.lower() and n.lower() == name.lower()
               for o, n in state.all_repositories()):  # fmt: skip
            exists = {"resource": "Repository", "code": "custom", "field": "name",
                      "message": "name already exists on this account"}  # fmt: skip
            return 422, {"message": failed, "errors": [exists]}, {}
        private = body.get("private", False) is True
        if private and not state.private_allowed:
            plan = {"resource": "Repository", "code": "custom", "field": "visibility"}
            plan["message"] = "visibility can't be private. Please upgrade your plan."
            return 422, {"message": failed, "errors": [plan]}, {}
        state.create_repository(owner, name, readme=body.get("auto_init") is True)
        if private:
            state.private_repos.add(f"{owner}/{name}")
        return 201, state.repo_json(owner, name), {}

    def _installation_json(self, installation: Installation) -> Json:
        return {
            "id": installation.id,
            "app_id": self.server_state.app_id,
            "account": {"login": installation.account},
            "repository_selection": "all" if installation.repositories is None else "selected",
        }

    def _page(
        self, path: str, query: dict[str, str], items: list[Any]
    ) -> tuple[int, list[Any], dict[str, str]]:
        """One page as GitHub cuts it (``per_page`` at most 100, 30 by default) and its
        ``Link`` header: prev, next, last, first, each where GitHub sends it."""
        per_page = min(100, max(1, _number(query.get("per_page"), 30)))
        page = max(1, _number(query.get("page"), 1))
        last = max(1, math.ceil(len(items) / per_page))

        def link(number: int, rel: str) -> str:
            params = urlencode({**query, "per_page": per_page, "page": number})
            return f'<{self.server_state.url}{path}?{params}>; rel="{rel}"'

        links = []
        if page > 1:
            links.append(link(min(page - 1, last), "prev"))
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links.append(link(1, "first"))
        chunk = items[(page - 1) * per_page : page * per_page]
        return 200, chunk, ({"Link": ", ".join(links)} if links else {})

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

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(data).encode(), "application/json", headers)

    def _raw(
        self, status: int, payload: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _number(text: str | None, default: int) -> int:
    return int(text) if text is not None and text.isdigit() else default


@contextmanager
def github_server(
    root: Path, token: str, *, app_id: str | None = None, app_public_key: Any = None
) -> Iterator[GitHubState]:
    state = GitHubState(root=root, token=token, app_id=app_id, app_public_key=app_public_key)
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
