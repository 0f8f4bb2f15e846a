"""The repository picker on GitHub, end to end: the API in AWS mode (the Lambda transport)
with its GitHub host built from settings (a token or a GitHub App's key in Secrets Manager on
moto) against the GitHub-shaped server on 127.0.0.1 (``tests/github_server.py``): listing,
search, cursor paging across GitHub's pages and installations, branches, creating a
repository (token and App modes), and GitHub's refusals mapped to the answers docs/api.md
names."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from openagents.local.dynamodb import free_port
from openagents.settings import Settings

from tests.github_server import GitHubState, github_server
from tests.support import LambdaApi, git, make_origin

TOKEN = "ghp_picker_token_0123456789abcdef"
APP_ID = "424242"
TOOLS = [f"tool-{i:02d}" for i in range(55)]


def pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def app_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def served(tmp_path: Path, app_key: rsa.RSAPrivateKey) -> Iterator[GitHubState]:
    root = tmp_path / "served"
    (root / "acme").mkdir(parents=True)
    make_origin(root / "acme")  # acme/origin.git: main and feature
    with github_server(root, TOKEN, app_id=APP_ID, app_public_key=app_key.public_key()) as server:
        for name in TOOLS:
            server.create_repository("acme", name, readme=False)
        server.create_repository("solo", "notes", readme=True)
        server.create_repository("solo", "private-lab", readme=True)
        server.private_repos.add("solo/private-lab")
        yield server


@pytest.fixture
def make_api(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, served: GitHubState
) -> Callable[..., LambdaApi]:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    bucket = f"artifacts-{settings.table_name}"
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=bucket)
    secrets = boto3.client("secretsmanager", region_name=settings.region)
    made: list[str] = []

    def secret(value: str) -> str:
        name = f"github-{settings.table_name}-{len(made)}"
        made.append(name)
        return str(secrets.create_secret(Name=name, SecretString=value)["ARN"])

    def make(
        *, key: rsa.RSAPrivateKey | None = None, api_url: str | None = None, **update: Any
    ) -> LambdaApi:
        github: dict[str, Any] = {"github_api_url": api_url or served.url}
        if key is not None:
            github |= {
                "github_app_id": APP_ID,
                "github_app_private_key_secret_arn": secret(pem(key)),
            }
        else:
            github["github_token_secret_arn"] = secret(TOKEN)
        return LambdaApi(
            settings.model_copy(update={"artifact_bucket": bucket, **github, **update})
        )

    return make


def names(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [f"{r['owner']}/{r['name']}" for r in reply.body["repositories"]]


def test_token_lists_searches_and_pages_the_users_repositories(
    make_api: Callable[..., LambdaApi], served: GitHubState
) -> None:
    api = make_api()
    first = api.get("/api/repositories")
    assert names(first) == ["acme/origin", *[f"acme/{n}" for n in TOOLS[:49]]]
    assert first.body["repositories"][0] == {
        "repoUrl": "https://github.com/acme/origin",
        "name": "origin",
        "owner": "acme",
        "private": False,
        "defaultBranch": "main",
    }
    assert first.body["next"] == "0.2"
    second = api.get("/api/repositories", query={"cursor": first.body["next"]})
    assert names(second) == [*[f"acme/{n}" for n in TOOLS[49:]], "solo/notes", "solo/private-lab"]
    assert second.body["repositories"][-1]["private"] is True
    assert second.body["next"] is None
    assert ("GET", "/user/repos") in served.rest

    # a query keeps the page's matches; a page with none reads on to the next GitHub page
    tools = api.get("/api/repositories", query={"query": "TOOL-0"})
    assert names(tools) == [f"acme/tool-0{i}" for i in range(10)]
    assert tools.body["next"] == "0.2"
    notes = api.get("/api/repositories", query={"query": "solo/n"})
    assert (names(notes), notes.body["next"]) == (["solo/notes"], None)
    nothing = api.get("/api/repositories", query={"query": "zzz"})
    assert (names(nothing), nothing.body["next"]) == ([], None)

    # a full last page is the last: GitHub's Link header says so, not the page's length
    for name in TOOLS[49:]:
        shutil.rmtree(served.root / "acme" / f"{name}.git")
    shutil.rmtree(served.root / "solo")
    full = api.get("/api/repositories")
    assert (len(names(full)), full.body["next"]) == (50, None)

    bad = api.get("/api/repositories", query={"cursor": "x.1"})
    assert (bad.status, bad.error["field"]) == (400, "cursor")


def test_branches_default_first_and_unknown_repositories_404(
    make_api: Callable[..., LambdaApi], served: GitHubState
) -> None:
    api = make_api()
    bare = served.root / "acme" / "origin.git"
    for i in range(130):  # more than one GitHub page of 100
        git(bare, "branch", f"topic/{i:03d}", "main")
    reply = api.get(
        "/api/repositories/branches", query={"repoUrl": "https://github.com/acme/origin"}
    )
    assert reply.status == 200, reply.body
    branches = reply.body["branches"]
    assert branches[:3] == [
        {"name": "main", "default": True},
        {"name": "feature", "default": False},
        {"name": "topic/000", "default": False},
    ]
    assert len(branches) == 132
    assert branches[-1] == {"name": "topic/129", "default": False}
    pages = [p for m, p in served.rest if p == "/repos/acme/origin/branches"]
    assert len(pages) == 2
    dotgit = api.get(
        "/api/repositories/branches", query={"repoUrl": "https://github.com/acme/origin.git"}
    )
    assert dotgit.status == 200

    for url, status in (
        ("https://github.com/acme/nope", 404),  # GitHub's 404
        ("https://gitlab.com/acme/origin", 400),
        ("https://github.com/acme", 400),
        ("https://github.com/acme/origin/tree/main", 400),
        ("", 400),
    ):
        answer = api.get("/api/repositories/branches", query={"repoUrl": url})
        assert answer.status == status, (url, answer.body)
        assert answer.error["field"] == "repoUrl"


def test_token_creates_a_repository_for_its_user(
    make_api: Callable[..., LambdaApi], served: GitHubState
) -> None:
    api = make_api()
    created = api.post("/api/repositories", {"name": "fresh-start"})
    assert created.status == 201, created.body
    assert created.body == {
        "repository": {
            "repoUrl": "https://github.com/octocat/fresh-start",
            "name": "fresh-start",
            "owner": "octocat",
            "private": True,
            "defaultBranch": "main",
        }
    }
    bare = served.root / "octocat" / "fresh-start.git"
    assert git(bare, "log", "--format=%s", "main") == "Initial commit"  # auto_init: a README
    assert git(bare, "ls-tree", "--name-only", "main") == "README.md"
    assert ("POST", "/user/repos") in served.rest

    again = api.post("/api/repositories", {"name": "Fresh-Start", "private": False})
    assert (again.status, again.error["code"], again.error["field"]) == (409, "conflict", "name")

    served.private_allowed = False  # GitHub's other 422: its reason reaches the caller
    refused = api.post("/api/repositories", {"name": "closed"})
    assert (refused.status, refused.error["code"]) == (502, "git_host_error")
    assert "upgrade your plan" in refused.error["error"]
    public = api.post("/api/repositories", {"name": "open", "private": False})
    assert public.status == 201
    assert public.body["repository"]["private"] is False

    for name, status in (
        ("a b", 400),
        ("..", 400),
        ("semi;colon", 400),
        ("", 422),
        ("x" * 101, 422),
    ):
        bad = api.post("/api/repositories", {"name": name})  # 422: the body's schema (length)
        assert (bad.status, bad.error["field"]) == (status, "name"), name
    assert not (served.root / "octocat" / "closed.git").exists()

    into_org = make_api(github_repo_owner="no-such-org")  # GitHub's 404 for an unknown org
    missing = into_org.post("/api/repositories", {"name": "fresh"})
    assert (missing.status, missing.error["code"]) == (502, "git_host_error")
    assert "404" in missing.error["error"]


def test_app_lists_each_installations_repositories_and_creates_in_its_org(
    make_api: Callable[..., LambdaApi], served: GitHubState, app_key: rsa.RSAPrivateKey
) -> None:
    served.install("acme")
    served.install("solo", ("solo/notes",))
    api = make_api(key=app_key, github_repo_owner="acme")

    pages: list[list[str]] = []
    cursor: str | None = None
    cursors = []
    while True:
        reply = api.get("/api/repositories", query={"cursor": cursor} if cursor else None)
        pages.append(names(reply))
        cursor = reply.body["next"]
        cursors.append(cursor)
        if cursor is None:
            break
    assert cursors == ["0.2", "1.1", None]
    assert [len(p) for p in pages] == [50, 6, 1]
    assert pages[2] == ["solo/notes"]  # the selected repository only; never private-lab
    assert [name for page in pages for name in page] == [
        "acme/origin",
        *[f"acme/{n}" for n in TOOLS],
        "solo/notes",
    ]
    assert ("GET", "/app/installations") in served.rest
    assert ("GET", "/installation/repositories") in served.rest
    assert ("GET", "/user/repos") not in served.rest  # an App has no user

    reply = api.get(
        "/api/repositories/branches", query={"repoUrl": "https://github.com/acme/origin"}
    )
    assert reply.body == {
        "branches": [{"name": "main", "default": True}, {"name": "feature", "default": False}]
    }
    hidden = api.get(
        "/api/repositories/branches", query={"repoUrl": "https://github.com/solo/private-lab"}
    )
    assert (hidden.status, hidden.error["field"]) == (404, "repoUrl")

    created = api.post("/api/repositories", {"name": "new-project"})
    assert created.status == 201, created.body
    assert created.body["repository"]["repoUrl"] == "https://github.com/acme/new-project"
    assert ("GET", "/orgs/acme/installation") in served.rest
    assert ("POST", "/orgs/acme/repos") in served.rest
    assert (served.root / "acme" / "new-project.git").is_dir()

    no_owner = make_api(key=app_key).post("/api/repositories", {"name": "x"})
    assert (no_owner.status, no_owner.error["code"]) == (400, "no_git_host")
    assert "OPENAGENTS_GITHUB_REPO_OWNER" in no_owner.error["error"]
    elsewhere = make_api(key=app_key, github_repo_owner="elsewhere")
    not_installed = elsewhere.post("/api/repositories", {"name": "x"})
    assert (not_installed.status, not_installed.error["code"]) == (400, "no_git_host")
    assert "not installed on elsewhere" in not_installed.error["error"]


def test_github_refusing_the_app_or_unreachable_is_502_or_503(
    make_api: Callable[..., LambdaApi], served: GitHubState
) -> None:
    served.install("acme")
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = make_api(key=stranger).get("/api/repositories")  # a key GitHub does not know
    assert (refused.status, refused.error["code"]) == (502, "git_host_error")
    assert "rejected the credentials" in refused.error["error"]

    down = make_api(api_url=f"http://127.0.0.1:{free_port()}")
    for reply in (
        down.get("/api/repositories"),
        down.get("/api/repositories/branches", query={"repoUrl": "https://github.com/acme/origin"}),
        down.post("/api/repositories", {"name": "fresh"}),
    ):
        assert reply.status == 503, reply.body
        assert TOKEN not in str(reply.body)


# ---------------------------------------------------------------------- the server itself


def app_jwt(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    return jwt.encode({"iat": now - 60, "exp": now + 540, "iss": APP_ID, **claims}, key, "RS256")


def test_server_verifies_the_app_jwt_and_scopes_installation_tokens(
    served: GitHubState, app_key: rsa.RSAPrivateKey
) -> None:
    solo = served.install("solo", ("solo/notes",))
    now = int(time.time())
    with httpx.Client(base_url=served.url) as client:

        def get(path: str, bearer: str) -> httpx.Response:
            return client.get(path, headers={"Authorization": f"Bearer {bearer}"})

        assert get("/app/installations", app_jwt(app_key)).status_code == 200
        for bad in (
            app_jwt(app_key, iss="999"),
            app_jwt(app_key, iat=now - 1000, exp=now - 400),  # expired
            app_jwt(app_key, exp=now + 3600),  # longer than GitHub allows
            app_jwt(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
            jwt.encode({"iat": now, "exp": now + 60, "iss": APP_ID}, "secret", "HS256"),
            TOKEN,  # a user token is no App
        ):
            assert get("/app/installations", bad).status_code == 401
        assert get("/user/repos", app_jwt(app_key)).status_code == 401  # a JWT is no user

        path = f"/app/installations/{solo.id}/access_tokens"
        auth = {"Authorization": f"Bearer {app_jwt(app_key)}"}
        outside = client.post(path, json={"repositories": ["private-lab"]}, headers=auth)
        assert outside.status_code == 422
        minted = client.post(path, json={}, headers=auth)
        assert minted.status_code == 201
        token = minted.json()["token"]
        assert get("/repos/solo/notes", token).status_code == 200
        assert get("/repos/solo/private-lab", token).status_code == 404
        assert get("/repos/acme/origin/pulls", token).status_code == 404
        assert get("/app/installations", token).status_code == 401
        assert client.get("/repos/acme/origin").status_code == 200  # public: anyone reads it
        assert client.get("/repos/solo/private-lab").status_code == 404
        assert client.get("/user/repos").status_code == 401
        assert get("/user/repos", "ghp_wrong").status_code == 401

        page = get("/user/repos?per_page=20&page=2", TOKEN)
        assert [r["name"] for r in page.json()][:2] == ["tool-19", "tool-20"]
        link = f"{served.url}/user/repos?per_page=20"
        assert page.headers["Link"] == ", ".join(
            [
                f'<{link}&page=1>; rel="prev"',
                f'<{link}&page=3>; rel="next"',
                f'<{link}&page=3>; rel="last"',
                f'<{link}&page=1>; rel="first"',
            ]
        )
        assert "Link" not in get("/user/repos?per_page=100", TOKEN).headers
