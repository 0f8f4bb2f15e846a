"""Local repositories only under OPENAGENTS_LOCAL_REPO_ROOTS: never the state folder, never the
server's own checkout, symlinks resolved — at create (400 on repoUrl), and again before the
sandbox's bind (a path that became a symlink since is refused)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openagents.domain.models import LifecycleState, Session
from openagents.git.roots import LocalRepoRefused, local_repo_roots, server_checkout
from openagents.sandbox.port import SandboxError
from openagents.services.provisioning import _local_repo_paths
from openagents.settings import Settings

from tests.support import HttpApi, local_server, make_origin

SESSIONS = "/api/sessions"


@pytest.fixture
def repos(tmp_path: Path) -> Path:
    folder = tmp_path / "repos"
    folder.mkdir()
    return folder


@pytest.fixture
def api(settings: Settings, repos: Path) -> Iterator[HttpApi]:
    allowed = settings.model_copy(update={"local_repo_roots": (repos,)})
    with local_server(allowed) as base_url:
        client = HttpApi(allowed, base_url)
        yield client
        client.client.close()


def refused(api: HttpApi, url: str, field: str = "repoUrl") -> str:
    reply = api.post(SESSIONS, {field: url})
    assert reply.status == 400, reply.body
    assert reply.error["field"] == field, reply.body
    message = str(reply.error.get("message") or reply.error["error"])
    return message


def test_a_repository_under_a_root_is_saved_by_its_real_path(api: HttpApi, repos: Path) -> None:
    origin = make_origin(repos)
    (repos / "alias.git").symlink_to(origin)  # a symlink that stays inside the root
    for url in (str(origin), f"file://{origin}", str(repos / "alias.git")):
        reply = api.post(SESSIONS, {"repoUrl": url})
        assert reply.status == 201, reply.body
        assert reply.body["session"]["cloneUrl"] == f"file://{origin.resolve()}"


def test_a_repository_outside_the_roots_is_refused(api: HttpApi, tmp_path: Path) -> None:
    outside = make_origin(tmp_path)  # tmp_path/origin.git, beside the root
    message = refused(api, str(outside))
    assert "OPENAGENTS_LOCAL_REPO_ROOTS" in message
    refused(api, f"file://{outside}", field="cloneUrl")
    refused(api, "/etc")
    refused(api, f"{tmp_path}/repos/../origin.git")
    assert api.get(SESSIONS).body["sessions"] == []


def test_a_symlink_pointing_outside_is_refused(api: HttpApi, repos: Path, tmp_path: Path) -> None:
    outside = make_origin(tmp_path)
    (repos / "link.git").symlink_to(outside)
    (repos / "nested").symlink_to(tmp_path)  # a folder link: repos/nested/origin.git
    assert "OPENAGENTS_LOCAL_REPO_ROOTS" in refused(api, str(repos / "link.git"))
    refused(api, str(repos / "nested" / "origin.git"))


def test_the_state_folder_is_refused_even_under_a_root(settings: Settings, tmp_path: Path) -> None:
    roots = local_repo_roots([tmp_path], settings.home)
    for inside in (settings.home, settings.home / "sandboxes" / "s1" / "1" / "workspace"):
        with pytest.raises(LocalRepoRefused, match="state folder"):
            roots.resolve(str(inside))
    with pytest.raises(LocalRepoRefused, match="state folder"):  # a repository holding it
        roots.resolve(str(tmp_path))
    assert roots.resolve(str(tmp_path / "origin.git")) == (tmp_path / "origin.git").resolve()


def test_the_state_folder_over_the_api(settings: Settings, tmp_path: Path) -> None:
    allowed = settings.model_copy(update={"local_repo_roots": (tmp_path,)})
    with local_server(allowed) as base_url:
        client = HttpApi(allowed, base_url)
        assert "state folder" in refused(client, str(settings.home / "sandboxes"))
        assert "state folder" in refused(client, f"file://{tmp_path}")
        client.client.close()


def test_the_server_checkout_is_refused_even_under_a_root(tmp_path: Path) -> None:
    checkout = server_checkout()
    assert (checkout / "layers" / "core" / "openagents").is_dir()
    roots = local_repo_roots([Path("/")], tmp_path / "home")
    for inside in (checkout, checkout / ".git", checkout / "layers"):
        with pytest.raises(LocalRepoRefused, match="server's own checkout"):
            roots.resolve(f"file://{inside}")
    # a folder holding it (where the checkout sits beside the temp folder, as in CI's /tmp, that
    # folder also holds the state folder: either refusal is the right one)
    with pytest.raises(LocalRepoRefused, match=r"server's own checkout|the state folder"):
        roots.resolve(str(checkout.parent))
    (tmp_path / "link").symlink_to(checkout)
    with pytest.raises(LocalRepoRefused, match="server's own checkout"):
        roots.resolve(str(tmp_path / "link"))


def test_no_roots_means_no_local_repository(tmp_path: Path) -> None:
    roots = local_repo_roots([], tmp_path / "home")
    with pytest.raises(LocalRepoRefused, match=r"OPENAGENTS_LOCAL_REPO_ROOTS \(none configured\)"):
        roots.resolve(str(tmp_path / "repo.git"))


def test_the_setting_takes_colon_or_comma_separated_absolute_folders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAGENTS_LOCAL_REPO_ROOTS", "/srv/repos:/home/me/src, /opt/git")
    assert Settings().local_repo_roots == (
        Path("/srv/repos"),
        Path("/home/me/src"),
        Path("/opt/git"),
    )
    monkeypatch.setenv("OPENAGENTS_LOCAL_REPO_ROOTS", "")
    assert Settings().local_repo_roots == ()
    monkeypatch.setenv("OPENAGENTS_LOCAL_REPO_ROOTS", "relative/src")
    with pytest.raises(ValueError, match="absolute"):
        Settings()
    monkeypatch.delenv("OPENAGENTS_LOCAL_REPO_ROOTS")
    assert Settings().local_repo_roots == (Path.home(),)


def test_the_sandbox_bind_checks_again(settings: Settings, repos: Path, tmp_path: Path) -> None:
    roots = local_repo_roots([repos], settings.home)
    origin = make_origin(repos)

    def session(url: str | None) -> Session:
        return Session.model_validate(
            {
                "id": "s1",
                "user_id": "alice",
                "title": "t",
                "clone_url": url,
                "lifecycle_state": LifecycleState.PROVISIONING,
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
            }
        )

    assert _local_repo_paths(session(f"file://{origin}"), roots) == (str(origin),)
    assert _local_repo_paths(session("https://github.com/acme/app.git"), roots) == ()
    assert _local_repo_paths(session(None), roots) == ()
    # the folder was swapped for a symlink to somewhere else after the session was created
    elsewhere = make_origin(tmp_path)
    moved = repos / "moved.git"
    origin.rename(moved)
    origin.symlink_to(elsewhere)
    with pytest.raises(SandboxError, match="local repository refused"):
        _local_repo_paths(session(f"file://{origin}"), roots)
    origin.unlink()
    origin.symlink_to(moved)  # still inside the root, but no longer the path that was checked
    with pytest.raises(SandboxError, match="now resolves to"):
        _local_repo_paths(session(f"file://{origin}"), roots)
