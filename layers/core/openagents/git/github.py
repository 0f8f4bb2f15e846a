"""The GitHub adapter: REST API v3 over httpx (github.com or GitHub Enterprise Server), and the
control plane's pushes (a sandbox's bundle) and private clones over git's smart HTTP protocol
(``git/smart_http.py``, imported only on those paths) at ``git_url/<owner>/<name>.git``.

Two ways to authenticate, both loaded lazily so the composition root can read them from Secrets
Manager on first use:

- ``StaticToken``: one token (a fine-grained PAT) for every repository;
- ``GitHubApp``: an app JWT (RS256, app id and private key) is exchanged for an installation
  token of the repository owner's installation, scoped to the repository, and cached until five
  minutes before it expires.

A 401 drops the cached token and retries once with a fresh one. A rate limit with a short
``retry-after`` is retried once; anything longer is a ``GitHostError`` with ``retry_after``.
Tokens never appear in errors or logs: messages are built from paths and GitHub's own message,
which is scrubbed of every token the request used.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import jwt

from openagents.git import (
    CheckReport,
    CheckRun,
    ClonedRepository,
    GitHostError,
    MergeMethod,
    PrStatus,
    PullRequest,
    PullRequestState,
    Repo,
    pr_status,
)
from openagents.git.catalog import (
    PAGE_SIZE,
    BadCursor,
    BadRepositoryUrl,
    BranchInfo,
    RepositoryExists,
    RepositoryInfo,
    RepositoryMissing,
    RepositoryPage,
    sorted_branches,
)

if TYPE_CHECKING:
    from openagents.git import smart_http

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.github.com"
DEFAULT_GIT_URL = "https://github.com"  # smart HTTP: <git_url>/<owner>/<name>.git
MAX_PUSH_BUNDLE_BYTES = 512 << 20
DEFAULT_CLONE_MAX_BYTES = 512 << 20
GIT_TIMEOUT_SECONDS = 20.0  # per read: a push from the agent's call stays inside 29 s
API_VERSION = "2022-11-28"
MEDIA_TYPE = "application/vnd.github+json"
USER_AGENT = "openagents-control-plane"
TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
JWT_BACKDATE_SECONDS = 60  # GitHub's clock may be behind ours
JWT_LIFETIME_SECONDS = 9 * 60  # GitHub accepts at most 10 minutes
TOKEN_REFRESH_MARGIN_SECONDS = 5 * 60
MAX_RETRY_AFTER_SECONDS = 2.0  # one short wait and retry on a rate limit; longer waits raise
APP_PERMISSIONS = {"contents": "write", "pull_requests": "write"}
ALREADY_EXISTS = "a pull request already exists"
REDACTED = "***"
CHECKS_PAGE = 100  # check runs and statuses of one commit read (GitHub's page size cap)
ANNOTATIONS_PAGE = 50
BRANCH_PAGES = 10  # a repository's branches read at most (100 a page)
LIST_PAGES = 5  # GitHub pages one picker page reads at most while a query matches none
GITHUB_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class StaticToken:
    """A token read from ``source`` on first use, and again after GitHub rejects it."""

    source: Callable[[], str]


@dataclass(frozen=True)
class GitHubApp:
    """A GitHub App: ``private_key`` returns its PEM. Installation tokens are scoped to the one
    repository (contents and pull requests: write) unless ``scope_to_repository`` is off."""

    app_id: str
    private_key: Callable[[], str]
    scope_to_repository: bool = True


Credentials = StaticToken | GitHubApp


@dataclass(frozen=True)
class _CachedToken:
    value: str = field(repr=False)
    expires_at: float  # epoch seconds


class _Api:
    """Sends one request with GitHub's headers; one short retry on a rate limit."""

    def __init__(
        self, client: httpx.Client, clock: Callable[[], float], sleep: Callable[[float], None]
    ) -> None:
        self.client = client
        self._clock = clock
        self._sleep = sleep

    def send(
        self,
        method: str,
        path: str,
        bearer: str | None,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> httpx.Response:
        response = self._send_once(method, path, bearer, params, body)
        wait = _retry_after(response, self._clock())
        if wait is not None and wait <= MAX_RETRY_AFTER_SECONDS:
            log.warning("GitHub rate limit on %s %s; retrying in %.1f s", method, path, wait)
            self._sleep(wait)
            response = self._send_once(method, path, bearer, params, body)
        return response

    def ok_json(self, response: httpx.Response, what: str, secrets: Iterable[str | None]) -> Any:
        """The JSON of a 2xx answer; anything else is a ``GitHostError`` without secrets."""
        if response.is_success:
            try:
                return response.json()
            except ValueError:
                raise GitHostError(f"GitHub sent an unreadable answer ({what})") from None
        raise _error(response, what, secrets, self._clock())

    def _send_once(
        self,
        method: str,
        path: str,
        bearer: str | None,
        params: Mapping[str, str | int] | None,
        body: Mapping[str, Any] | None,
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        try:
            return self.client.request(method, path, params=params, json=body, headers=headers)
        except httpx.HTTPError as exc:
            reason = _scrub(f"{type(exc).__name__}: {exc}", [bearer])
            raise GitHostError(f"GitHub {method} {path} failed: {reason}") from None


class _StaticTokens:
    def __init__(self, credentials: StaticToken) -> None:
        self._source = credentials.source
        self._token: str | None = None
        self._lock = threading.Lock()

    def token(self, owner: str, name: str) -> str | None:
        with self._lock:
            if self._token is None:
                token = self._source().strip()
                if not token:
                    raise GitHostError("The GitHub token source returned an empty token")
                self._token = token
            return self._token

    def forget(self, owner: str, name: str) -> None:
        with self._lock:
            self._token = None


class _AppTokens:
    """Installation tokens per repository, minted with the app JWT and cached."""

    def __init__(self, app: GitHubApp, api: _Api, clock: Callable[[], float]) -> None:
        self._app = app
        self._api = api
        self._clock = clock
        self._installations: dict[tuple[str, str], int] = {}
        self._tokens: dict[tuple[str, str], _CachedToken] = {}
        self._lock = threading.Lock()

    def token(self, owner: str, name: str) -> str | None:
        key = (owner.lower(), name.lower())
        with self._lock:
            cached = self._tokens.get(key)
            if cached and self._clock() < cached.expires_at - TOKEN_REFRESH_MARGIN_SECONDS:
                return cached.value
            installation_id = self._installation(owner, name)
            if installation_id is None:
                return None
            cached = self._exchange(installation_id, owner, name)
            self._tokens[key] = cached
            return cached.value

    def forget(self, owner: str, name: str) -> None:
        key = (owner.lower(), name.lower())
        with self._lock:
            self._tokens.pop(key, None)
            self._installations.pop(key, None)

    def app_jwt(self) -> str:
        now = int(self._clock())
        claims = {
            "iat": now - JWT_BACKDATE_SECONDS,
            "exp": now + JWT_LIFETIME_SECONDS,
            "iss": self._app.app_id,
        }
        return jwt.encode(claims, self._app.private_key(), algorithm="RS256")

    def _installation(self, owner: str, name: str) -> int | None:
        """The app's installation for the repository (cached); None when the app is not
        installed there (not cached: it may be installed at any time)."""
        key = (owner.lower(), name.lower())
        if key not in self._installations:
            app_jwt = self.app_jwt()
            path = f"/repos/{owner}/{name}/installation"
            response = self._api.send("GET", path, app_jwt)
            if response.status_code == 404:
                log.info("GitHub App is not installed for %s/%s", owner, name)
                return None
            what = f"the app installation for {owner}/{name}"
            data = self._api.ok_json(response, what, [app_jwt])
            self._installations[key] = int(data["id"])
        return self._installations[key]

    def installations(self) -> list[int]:
        """The app's installations (one page of 100: an app for one platform has a few)."""
        app_jwt = self.app_jwt()
        response = self._api.send("GET", "/app/installations", app_jwt, params={"per_page": 100})
        data = self._api.ok_json(response, "the app's installations", [app_jwt])
        return [int(item["id"]) for item in data if isinstance(item, dict) and "id" in item]

    def owner_installation(self, owner: str) -> int | None:
        """The installation on an organization (None: the app is not installed there)."""
        app_jwt = self.app_jwt()
        response = self._api.send("GET", f"/orgs/{owner}/installation", app_jwt)
        if response.status_code == 404:
            return None
        data = self._api.ok_json(response, f"the app installation on {owner}", [app_jwt])
        return int(data["id"])

    def installation_token(self, installation_id: int) -> str:
        """A token of the whole installation (every repository it reaches), cached."""
        key = (f"#installation:{installation_id}", "")
        with self._lock:
            cached = self._tokens.get(key)
            if cached and self._clock() < cached.expires_at - TOKEN_REFRESH_MARGIN_SECONDS:
                return cached.value
            app_jwt = self.app_jwt()
            path = f"/app/installations/{installation_id}/access_tokens"
            response = self._api.send("POST", path, app_jwt, body={})
            data = self._api.ok_json(response, "an installation token", [app_jwt])
            expires_at = datetime.fromisoformat(str(data["expires_at"])).timestamp()
            cached = _CachedToken(value=str(data["token"]), expires_at=expires_at)
            self._tokens[key] = cached
            return cached.value

    def _exchange(self, installation_id: int, owner: str, name: str) -> _CachedToken:
        app_jwt = self.app_jwt()
        body: dict[str, Any] = {}
        if self._app.scope_to_repository:
            body = {"repositories": [name], "permissions": dict(APP_PERMISSIONS)}
        path = f"/app/installations/{installation_id}/access_tokens"
        response = self._api.send("POST", path, app_jwt, body=body)
        if response.status_code == 404:  # uninstalled since we looked it up
            self._installations.pop((owner.lower(), name.lower()), None)
        data = self._api.ok_json(response, f"an installation token for {owner}/{name}", [app_jwt])
        expires_at = datetime.fromisoformat(str(data["expires_at"])).timestamp()
        return _CachedToken(value=str(data["token"]), expires_at=expires_at)


class GitHubHost:
    """The git host port on GitHub's REST API."""

    name = "github"

    def __init__(
        self,
        credentials: Credentials,
        *,
        base_url: str = DEFAULT_BASE_URL,
        git_url: str = DEFAULT_GIT_URL,
        clone_max_bytes: int = DEFAULT_CLONE_MAX_BYTES,
        repo_owner: str | None = None,
        timeout_seconds: float = TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        client = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(timeout_seconds, connect=CONNECT_TIMEOUT_SECONDS),
            headers={
                "Accept": MEDIA_TYPE,
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            },
            transport=transport,
            follow_redirects=False,
        )
        self._api = _Api(client, clock, sleep)
        self._git_url = git_url.rstrip("/")
        self._clone_max_bytes = clone_max_bytes
        self._repo_owner = repo_owner  # where new repositories go (None: the token's user)
        self._tokens: _StaticTokens | _AppTokens
        if isinstance(credentials, GitHubApp):
            self._tokens = _AppTokens(credentials, self._api, clock)
        else:
            self._tokens = _StaticTokens(credentials)

    def close(self) -> None:
        self._api.client.close()

    def __enter__(self) -> GitHubHost:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the port

    def clone_token(self, repo: Repo) -> str | None:
        owner, name = _owner_and_name(repo)
        return self._tokens.token(owner, name)

    def pull_request(self, repo: Repo, number: int) -> PullRequest | None:
        owner, name = _owner_and_name(repo)
        path = f"/repos/{owner}/{name}/pulls/{number}"
        data = self._read(owner, name, path, f"pull request #{number} of {owner}/{name}")
        return None if data is None else _pull_request(data)

    def pull_request_for_branch(self, repo: Repo, branch: str) -> PullRequest | None:
        owner, name = _owner_and_name(repo)
        params = _branch_query(owner, branch, state="all")
        path = f"/repos/{owner}/{name}/pulls"
        found = self._read(owner, name, path, f"pull requests from {branch}", params)
        return _pull_request(found[0]) if found else None

    def create_pull_request(
        self,
        repo: Repo,
        *,
        head_branch: str,
        base_branch: str,
        title: str,
        body: str,
        draft: bool = False,
    ) -> PullRequest:
        owner, name = _owner_and_name(repo)
        path = f"/repos/{owner}/{name}/pulls"
        request: dict[str, Any] = {
            "title": title,
            "head": head_branch,
            "base": base_branch,
            "body": body,
        }
        if draft:
            request["draft"] = True
        response, token = self._call("POST", owner, name, path, body=request)
        what = f"creating a pull request from {head_branch} into {base_branch}"
        if response.status_code == 422 and ALREADY_EXISTS in _error_text(response):
            existing = self._open_pull_request(owner, name, head_branch, base_branch)
            if existing is not None:
                return existing
        return _pull_request(self._api.ok_json(response, what, [token]))

    def default_branch(self, repo: Repo) -> str | None:
        owner, name = _owner_and_name(repo)
        data = self._read(owner, name, f"/repos/{owner}/{name}", f"repository {owner}/{name}")
        return None if data is None else str(data["default_branch"])

    def merge_pull_request(self, repo: Repo, number: int, *, method: MergeMethod) -> PullRequest:
        owner, name = _owner_and_name(repo)
        path = f"/repos/{owner}/{name}/pulls/{number}/merge"
        response, token = self._call("PUT", owner, name, path, body={"merge_method": method})
        what = f"merging pull request #{number} of {owner}/{name}"
        if response.status_code in (405, 409):  # not mergeable / the head moved: GitHub's reason
            reason = _scrub(_error_text(response, original_case=True), [token])
            raise GitHostError(reason or "The pull request is not mergeable", status=405)
        self._api.ok_json(response, what, [token])
        merged = self.pull_request(repo, number)
        if merged is None:
            raise GitHostError(f"Pull request #{number} disappeared ({what})", status=404)
        return merged

    def close_pull_request(self, repo: Repo, number: int) -> PullRequest:
        owner, name = _owner_and_name(repo)
        path = f"/repos/{owner}/{name}/pulls/{number}"
        current = self.pull_request(repo, number)
        if current is None:
            raise GitHostError(f"Pull request #{number} of {owner}/{name} not found", status=404)
        if current.state is not PrStatus.OPEN:
            return current
        response, token = self._call("PATCH", owner, name, path, body={"state": "closed"})
        what = f"closing pull request #{number} of {owner}/{name}"
        return _pull_request(self._api.ok_json(response, what, [token]))

    # ------------------------------------------------------------------ checks (ReportsChecks)

    def pull_request_state(self, repo: Repo, number: int) -> PullRequestState | None:
        """The pull request, its head's combined status and check runs (one page of each), and
        the merge methods the repository allows (all three when GitHub does not say)."""
        owner, name = _owner_and_name(repo)
        base = f"/repos/{owner}/{name}"
        data = self._read(owner, name, f"{base}/pulls/{number}", f"pull request #{number}")
        if data is None:
            return None
        sha = str(data["head"]["sha"])
        settings = self._read(owner, name, base, f"repository {owner}/{name}") or {}
        status = self._read(
            owner, name, f"{base}/commits/{sha}/status", f"the status of {sha[:12]}",
            {"per_page": CHECKS_PAGE},
        ) or {}  # fmt: skip
        runs = self._read(
            owner, name, f"{base}/commits/{sha}/check-runs", f"the check runs of {sha[:12]}",
            {"per_page": CHECKS_PAGE},
        ) or {}  # fmt: skip
        checks = [_status_check(item) for item in status.get("statuses") or []]
        checks += [_check_run(item) for item in runs.get("check_runs") or []]
        mergeable = data.get("mergeable")
        return PullRequestState(
            pull=_pull_request(data),
            head_sha=sha,
            draft=bool(data.get("draft")),
            mergeable=mergeable if isinstance(mergeable, bool) else None,
            mergeable_state=_text(data.get("mergeable_state")),
            checks=tuple(checks),
            allowed_methods=_allowed_methods(settings),
        )

    def check_report(self, repo: Repo, check_id: int, *, max_log_bytes: int) -> CheckReport:
        """The check run's output and annotations, and the tail of its Actions job log (a
        check run of GitHub Actions is its job; GitHub answers the log with a redirect to
        storage, followed here without our token). A check with no log keeps ``log`` empty."""
        owner, name = _owner_and_name(repo)
        base = f"/repos/{owner}/{name}"
        data = self._read(owner, name, f"{base}/check-runs/{check_id}", f"check run {check_id}")
        if data is None:
            raise GitHostError(f"Check run {check_id} of {owner}/{name} not found", status=404)
        output = data.get("output") or {}
        summary = "\n".join(
            _text(output.get(key)) or "" for key in ("title", "summary", "text")
        ).strip()
        found = self._read(
            owner, name, f"{base}/check-runs/{check_id}/annotations", "its annotations",
            {"per_page": ANNOTATIONS_PAGE},
        ) or []  # fmt: skip
        annotations = tuple(_annotation(item) for item in found if isinstance(item, dict))
        log_text = self._job_log(owner, name, check_id, max_log_bytes)
        return CheckReport(_check_run(data), summary, annotations, log_text)

    def _job_log(self, owner: str, name: str, job_id: int, max_bytes: int) -> str:
        path = f"/repos/{owner}/{name}/actions/jobs/{job_id}/logs"
        response, token = self._call("GET", owner, name, path)
        if response.status_code in (404, 410):  # not an Actions job, or its log expired
            return ""
        if response.status_code in (301, 302, 303, 307, 308):
            location = response.headers.get("location")
            if not location:
                return ""
            try:  # a pre-signed storage URL: the client sends no token unless one is passed
                with self._api.client.stream("GET", location) as stored:
                    if not stored.is_success:
                        return ""
                    return _tail(stored.iter_bytes(), max_bytes)
            except httpx.HTTPError as exc:
                log.warning("the log of job %s could not be read: %s", job_id, type(exc).__name__)
                return ""
        if not response.is_success:
            raise _error(response, f"the log of job {job_id}", [token], time.time())
        return _tail(iter([response.content]), max_bytes)

    # ------------------------------------------------------------------ git over smart HTTP

    def receives(self, repo: Repo) -> bool:
        return bool(repo.owner and repo.name)

    def receive_bundle(self, repo: Repo, *, branch: str, bundle: bytes, force: bool) -> str:
        """Push a sandbox's bundle (only ``refs/heads/<branch>``) to the repository over smart
        HTTP with the repository's token; fast-forward only unless ``force``."""
        from openagents.git import smart_http  # dulwich: only the push and clone paths pay

        if len(bundle) > MAX_PUSH_BUNDLE_BYTES:
            raise GitHostError(f"The bundle exceeds {MAX_PUSH_BUNDLE_BYTES} bytes", status=413)
        smart_http.branch_ref(branch)
        return self._with_token(
            repo,
            lambda remote: smart_http.push_bundle(
                remote, branch=branch, bundle=bundle, force=force
            ),
        )

    def clone(
        self, repo: Repo, *, branch: str | None, is_new_branch: bool
    ) -> ClonedRepository | None:
        """The repository's default branch and ``branch`` fetched with its token, as a bundle;
        None without a token (a public repository: the sandbox clones it anonymously)."""
        from openagents.git import smart_http

        owner, name = _owner_and_name(repo)
        if self._tokens.token(owner, name) is None:
            return None
        return self._with_token(
            repo,
            lambda remote: smart_http.clone_bundle(
                remote, branch=branch, is_new_branch=is_new_branch, max_bytes=self._clone_max_bytes
            ),
        )

    def _with_token(self, repo: Repo, call: Callable[[smart_http.Remote], T]) -> T:
        """``call`` with the repository's remote and token; a 401 retries once, fresh token."""
        from openagents.git.smart_http import Remote

        owner, name = _owner_and_name(repo)
        url = f"{self._git_url}/{owner}/{name}.git"
        token = self._tokens.token(owner, name)
        remote = Remote(url, token, GIT_TIMEOUT_SECONDS, label=f"{owner}/{name}")
        try:
            return call(remote)
        except GitHostError as exc:
            if exc.status != 401 or token is None:
                raise
        log.warning("GitHub rejected the token for %s/%s (git); fetching a new one", owner, name)
        self._tokens.forget(owner, name)
        token = self._tokens.token(owner, name)
        return call(Remote(url, token, GIT_TIMEOUT_SECONDS, label=f"{owner}/{name}"))

    # ------------------------------------------------------------------ the picker (catalog.py)

    def repositories(self, query: str, cursor: str | None) -> RepositoryPage:
        """The installations' repositories (``GET /installation/repositories`` with each
        installation's token), or the token's (``GET /user/repos``), ``PAGE_SIZE`` a GitHub
        page; ``query`` filters each page by ``owner/name``, and a page with no match reads on
        (at most ``LIST_PAGES``). The cursor is ``<installation index>.<page>``."""
        source, page = _list_cursor(cursor)
        needle = query.strip().lower()
        sources = self._sources()
        found: list[RepositoryInfo] = []
        for _ in range(LIST_PAGES):
            if source >= len(sources):
                return RepositoryPage(tuple(found), None)
            path, token, key = sources[source]
            params: dict[str, str | int] = {"per_page": PAGE_SIZE, "page": page}
            if key is None:
                params["sort"] = "full_name"
            response = self._api.send("GET", path, token, params=params)
            data = self._api.ok_json(response, "the repositories", [token])
            items = data.get(key) if key is not None and isinstance(data, dict) else data
            items = items if isinstance(items, list) else []
            found += [
                info
                for item in items
                if isinstance(item, dict)
                and (info := self._info(item)) is not None
                and needle in f"{info.owner}/{info.name}".lower()
            ]
            source, page = (source, page + 1) if _has_next(response) else (source + 1, 1)
            if found:
                break
        more = source < len(sources)
        return RepositoryPage(tuple(found), f"{source}.{page}" if more else None)

    def branches(self, repo_url: str) -> list[BranchInfo]:
        owner, name = self._parse_url(repo_url)
        data = self._read(owner, name, f"/repos/{owner}/{name}", f"repository {owner}/{name}")
        if data is None:
            raise RepositoryMissing(f"No repository {owner}/{name} the platform can reach")
        names: list[str] = []
        for page in range(1, BRANCH_PAGES + 1):
            path = f"/repos/{owner}/{name}/branches"
            params = {"per_page": 100, "page": page}
            response, token = self._call("GET", owner, name, path, params=params)
            if response.status_code == 404:
                raise RepositoryMissing(f"No repository {owner}/{name} the platform can reach")
            found = self._api.ok_json(response, f"the branches of {owner}/{name}", [token])
            found = found if isinstance(found, list) else []
            names += [
                item["name"]
                for item in found
                if isinstance(item, dict) and isinstance(item.get("name"), str)
            ]
            if not _has_next(response):
                break
        return sorted_branches(names, _text(data.get("default_branch")))

    def create_repository(self, name: str, *, private: bool) -> RepositoryInfo:
        """``POST /orgs/{owner}/repos`` with ``repo_owner`` set, else ``POST /user/repos``
        (a token's user; an app has none), with a README so it has a default branch."""
        owner = self._repo_owner
        token: str | None
        if isinstance(self._tokens, _AppTokens):
            if not owner:
                raise GitHostError(
                    "A GitHub App creates repositories in an organization: set "
                    "OPENAGENTS_GITHUB_REPO_OWNER",
                    status=400,
                )
            installation = self._tokens.owner_installation(owner)
            if installation is None:
                raise GitHostError(f"The GitHub App is not installed on {owner}", status=400)
            token = self._tokens.installation_token(installation)
        else:
            token = self._tokens.token(owner or "", name)
        path = f"/orgs/{owner}/repos" if owner else "/user/repos"
        body = {"name": name, "private": private, "auto_init": True}
        response = self._api.send("POST", path, token, body=body)
        if response.status_code == 422 and "already exists" in _error_text(response):
            raise RepositoryExists(f"A repository named {name} exists already")
        info = self._info(self._api.ok_json(response, f"creating repository {name}", [token]))
        if info is None:
            raise GitHostError(f"GitHub answered creating {name} without the repository")
        return info

    def _sources(self) -> list[tuple[str, str | None, str | None]]:
        """(path, token, the answer's list key) per list to read, in order."""
        if isinstance(self._tokens, _AppTokens):
            tokens = self._tokens
            return [
                ("/installation/repositories", tokens.installation_token(i), "repositories")
                for i in tokens.installations()
            ]
        return [("/user/repos", self._tokens.token("", ""), None)]

    def _info(self, data: Mapping[str, Any]) -> RepositoryInfo | None:
        owner = data.get("owner")
        login = _text(owner.get("login")) if isinstance(owner, dict) else None
        name = _text(data.get("name"))
        if not login or not name:
            return None
        return RepositoryInfo(
            repo_url=f"{self._git_url}/{login}/{name}",
            name=name,
            owner=login,
            private=bool(data.get("private")),
            default_branch=_text(data.get("default_branch")),
        )

    def _parse_url(self, repo_url: str) -> tuple[str, str]:
        given = repo_url.strip().removesuffix("/").removesuffix(".git")
        prefix = f"{self._git_url}/"
        parts = given[len(prefix) :].split("/") if given.startswith(prefix) else []
        if len(parts) != 2 or not all(GITHUB_NAME.match(part) for part in parts):
            raise BadRepositoryUrl(f"repoUrl must be {self._git_url}/<owner>/<repository>")
        return parts[0], parts[1]

    # ------------------------------------------------------------------ helpers

    def _open_pull_request(
        self, owner: str, name: str, head_branch: str, base_branch: str
    ) -> PullRequest | None:
        params = {**_branch_query(owner, head_branch, state="open"), "base": base_branch}
        path = f"/repos/{owner}/{name}/pulls"
        found = self._read(owner, name, path, f"open pull requests from {head_branch}", params)
        return _pull_request(found[0]) if found else None

    def _read(
        self,
        owner: str,
        name: str,
        path: str,
        what: str,
        params: Mapping[str, str | int] | None = None,
    ) -> Any:
        """GET ``path``: its JSON, or None on 404."""
        response, token = self._call("GET", owner, name, path, params=params)
        if response.status_code == 404:
            return None
        return self._api.ok_json(response, what, [token])

    def _call(
        self,
        method: str,
        owner: str,
        name: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> tuple[httpx.Response, str | None]:
        """One request with the repository's token; a 401 retries once with a fresh token."""
        token = self._tokens.token(owner, name)
        response = self._api.send(method, path, token, params=params, body=body)
        if response.status_code == 401 and token is not None:
            log.warning("GitHub rejected the token for %s/%s; fetching a new one", owner, name)
            self._tokens.forget(owner, name)
            token = self._tokens.token(owner, name)
            response = self._api.send(method, path, token, params=params, body=body)
        return response, token


# ---------------------------------------------------------------------- pure helpers


def _has_next(response: httpx.Response) -> bool:
    """GitHub's ``Link`` header names a next page (its only sign that one exists: a full page
    may be the last)."""
    return any(link.get("rel") == "next" for link in response.links.values())


def _list_cursor(cursor: str | None) -> tuple[int, int]:
    if cursor is None:
        return 0, 1
    source, _, page = cursor.partition(".")
    if not (source.isdigit() and page.isdigit()) or len(cursor) > 20 or int(page) < 1:
        raise BadCursor("Not a cursor of this list")
    return int(source), int(page)


def _owner_and_name(repo: Repo) -> tuple[str, str]:
    if not repo.owner or not repo.name:
        where = repo.clone_url or "this repository"
        raise GitHostError(f"GitHub needs a repository owner and name ({where} has none)")
    return repo.owner, repo.name


def _branch_query(owner: str, branch: str, *, state: str) -> dict[str, str | int]:
    return {
        "head": f"{owner}:{branch}",
        "state": state,
        "sort": "updated",
        "direction": "desc",
        "per_page": 1,
    }


def _pull_request(data: Mapping[str, Any]) -> PullRequest:
    merged = bool(data.get("merged")) or data.get("merged_at") is not None
    return PullRequest(
        number=int(data["number"]),
        state=pr_status(state=str(data["state"]), merged=merged),
        url=str(data["html_url"]),
        head_branch=str(data["head"]["ref"]),
        base_branch=str(data["base"]["ref"]),
        title=str(data["title"]),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _check_run(data: Mapping[str, Any]) -> CheckRun:
    return CheckRun(
        id=int(data.get("id") or 0),
        name=str(data.get("name") or "check"),
        status=str(data.get("status") or "queued"),
        conclusion=_text(data.get("conclusion")),
        url=_text(data.get("html_url")) or _text(data.get("details_url")),
    )


def _status_check(data: Mapping[str, Any]) -> CheckRun:
    """A commit status context as a check: pending, else completed with its state."""
    state = str(data.get("state") or "pending")
    done = state != "pending"
    return CheckRun(
        id=0,
        name=str(data.get("context") or "status"),
        status="completed" if done else "pending",
        conclusion=("success" if state == "success" else "failure") if done else None,
        url=_text(data.get("target_url")),
    )


def _annotation(data: Mapping[str, Any]) -> str:
    where = f"{data.get('path') or '?'}:{data.get('start_line') or '?'}"
    level = _text(data.get("annotation_level")) or "failure"
    return f"{where}: {level}: {_text(data.get('message')) or ''}".strip()


def _allowed_methods(settings: Mapping[str, Any]) -> tuple[MergeMethod, ...]:
    flags: tuple[tuple[MergeMethod, str], ...] = (
        ("merge", "allow_merge_commit"),
        ("squash", "allow_squash_merge"),
        ("rebase", "allow_rebase_merge"),
    )
    return tuple(method for method, key in flags if settings.get(key, True) is not False)


def _tail(chunks: Iterable[bytes], max_bytes: int) -> str:
    """The last ``max_bytes`` of a stream, as text (a cut line at the start dropped)."""
    kept = b""
    cut = False
    for chunk in chunks:
        kept += chunk
        if len(kept) > max_bytes:
            kept, cut = kept[-max_bytes:], True
    text = kept.decode("utf-8", errors="replace")
    return text.split("\n", 1)[-1] if cut else text


def _error(
    response: httpx.Response, what: str, secrets: Iterable[str | None], now: float
) -> GitHostError:
    status = response.status_code
    retry_after = _retry_after(response, now)
    if retry_after is not None or _rate_limited(response):
        wait = f"; retry after {retry_after:.0f} s" if retry_after is not None else ""
        message = f"GitHub rate limit exceeded ({what}){wait}"
    elif status == 401:
        message = f"GitHub rejected the credentials ({what})"
    else:
        detail = _scrub(_error_text(response, original_case=True), secrets)
        message = f"GitHub request failed ({what}): {status} {detail}".rstrip()
    return GitHostError(message, status=status, retry_after=retry_after)


def _error_text(response: httpx.Response, *, original_case: bool = False) -> str:
    """GitHub's message plus each validation error's message."""
    try:
        data = response.json()
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message") or "")]
    errors = data.get("errors")
    if isinstance(errors, list):
        parts += [str(e.get("message") or "") for e in errors if isinstance(e, dict)]
    text = "; ".join(part for part in parts if part)[:500]
    return text if original_case else text.lower()


def _rate_limited(response: httpx.Response) -> bool:
    if response.status_code == 429:
        return True
    return response.status_code == 403 and response.headers.get("x-ratelimit-remaining") == "0"


def _retry_after(response: httpx.Response, now: float) -> float | None:
    """Seconds to wait when the answer is a rate limit that says how long, else None."""
    if response.status_code not in (403, 429):
        return None
    header = response.headers.get("retry-after")
    if header is not None and header.strip().isdigit():
        return float(header.strip())
    reset = response.headers.get("x-ratelimit-reset")
    if _rate_limited(response) and reset is not None and reset.strip().isdigit():
        return max(0.0, float(reset) - now)
    return None


def _scrub(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text
