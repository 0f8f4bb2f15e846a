"""The one-machine repository catalog (``git/local.py``'s ``LocalCatalog``) on real folders:
the scan's caps (depth, repositories, hidden and forbidden folders, a repository's own
folders), its paging, and the cache expiring on a controllable clock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from openagents.git.catalog import PAGE_SIZE, BadCursor
from openagents.git.local import SCAN_DEPTH, SCAN_MAX_REPOSITORIES, SCAN_TTL_SECONDS, LocalCatalog
from openagents.git.roots import local_repo_roots

from tests.support import git


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """One bare repository (HEAD on trunk) copied wherever a test wants many."""
    bare = tmp_path / "template.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "trunk", str(bare))
    return bare


def repo(template: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, path)
    return path


def catalog(root: Path, clock: Clock, tmp_path: Path) -> LocalCatalog:
    return LocalCatalog(local_repo_roots([root], tmp_path / "home"), clock=clock)


def listed(found: LocalCatalog, query: str = "") -> list[str]:
    urls: list[str] = []
    cursor: str | None = None
    while True:
        page = found.repositories(query, cursor)
        assert len(page.repositories) <= PAGE_SIZE
        urls += [r.repo_url for r in page.repositories]
        if page.next is None:
            return urls
        cursor = page.next


def test_the_scan_stops_at_its_depth_and_skips_hidden_forbidden_and_inner_folders(
    template: Path, tmp_path: Path
) -> None:
    root = (tmp_path / "root").resolve()
    deep = root.joinpath(*[f"d{i}" for i in range(SCAN_DEPTH - 1)])
    repo(template, deep / "deepest.git")  # SCAN_DEPTH folders below the root: found
    repo(template, deep / "d9" / "too-deep.git")  # one more: not
    repo(template, root / ".cache" / "hidden.git")
    outer = repo(template, root / "outer.git")
    repo(template, outer / "inner.git")  # a repository's own folders are not entered
    home = tmp_path / "home"
    (tmp_path / "root" / "home-link").symlink_to(home, target_is_directory=True)
    repo(template, home / "state.git")  # the state folder is forbidden (and behind a symlink)
    roots = local_repo_roots([root, home], home)
    found = LocalCatalog(roots, clock=Clock())
    page = found.repositories("", None)
    assert [r.repo_url for r in page.repositories] == [
        str(deep / "deepest.git"),
        str(root / "outer.git"),
    ]
    assert page.repositories[0].name == "deepest"
    assert page.repositories[0].default_branch == "trunk"
    assert page.next is None


def test_at_most_the_cap_of_repositories_paged_fifty_at_a_time(
    template: Path, tmp_path: Path
) -> None:
    root = (tmp_path / "root").resolve()
    for i in range(SCAN_MAX_REPOSITORIES + 20):
        repo(template, root / f"g{i // 100}" / f"r{i:04d}.git")
    clock = Clock()
    found = catalog(root, clock, tmp_path)
    urls = listed(found)
    assert len(urls) == SCAN_MAX_REPOSITORIES
    assert urls == sorted(urls)
    assert len(set(urls)) == len(urls)
    first = found.repositories("", None)
    assert first.next == f"o{PAGE_SIZE}"
    assert found.repositories("", f"o{SCAN_MAX_REPOSITORIES}").repositories == ()
    assert listed(found, "R000") == [str(root / "g0" / f"r000{i}.git") for i in range(10)]
    for bad in ("50", "o-1", "ox", "o" + "9" * 20):
        with pytest.raises(BadCursor):
            found.repositories("", bad)


def test_the_scan_is_cached_until_its_ttl_on_the_clock(template: Path, tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    repo(template, root / "first.git")
    clock = Clock()
    found = catalog(root, clock, tmp_path)
    assert listed(found) == [str(root / "first.git")]
    repo(template, root / "second.git")
    shutil.rmtree(root / "first.git")
    clock.now += SCAN_TTL_SECONDS - 0.5
    assert listed(found) == [str(root / "first.git")]  # still the cached scan
    clock.now += 0.5
    assert listed(found) == [str(root / "second.git")]  # expired: scanned again
    # branches never come from the cache: they are read from the repository
    git(root / "second.git", "symbolic-ref", "HEAD", "refs/heads/main")
    assert found.branches(str(root / "second.git")) == []  # no commit yet: no branch


def test_a_hostile_head_names_no_default_branch(template: Path, tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    bad = repo(template, root / "bad.git")
    (bad / "HEAD").write_text("ref: refs/heads/" + "x" * (4 << 20))  # 4 MiB
    odd = repo(template, root / "odd.git")
    (odd / "HEAD").write_bytes(b"ref: refs/heads/\xff\xfe\x00main")
    found = catalog(root, Clock(), tmp_path).repositories("", None).repositories
    assert [r.name for r in found] == ["bad", "odd"]
    assert [r.default_branch for r in found] == [None, None]  # neither names a branch
