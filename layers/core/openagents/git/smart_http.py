"""The control plane's own git network calls over git's smart HTTP protocol (v0): push a
sandbox's bundle to a remote, and fetch a repository's branches as a bundle for a sandbox. The
token goes only here, as basic auth (``x-access-token``); a sandbox never sees it.

Lambda has no ``git`` binary, so nothing here runs one: httpx carries the two requests of each
exchange (``info/refs`` then ``git-receive-pack`` / ``git-upload-pack``; redirects are never
followed, so the token reaches only the configured host) and dulwich reads and checks the git
formats (bundles, pkt-lines, packs). A bundle's pack goes to the remote byte for byte: a thin
bundle's deltas name objects the remote has, which no client that re-encodes the pack (dulwich's
``send_pack`` does) could carry.

A sandbox is hostile, so its bundle is untrusted data: it must name exactly the one ref the
control plane chose, its pack's inflated sizes are measured before dulwich reads an object
(``pack_guard.check_inflation``: an object over 128 MiB or a pack over 2 GiB is refused), its
pack must verify, and a push is fast-forward only unless forced (the
old commit must be the new one's ancestor: a prerequisite of a thin bundle, or found in a whole
bundle's history). A thin bundle whose prerequisites are not the remote's tips, or that cannot
show a fast-forward, is a 412: the caller sends the whole branch, which always can. Errors say
what failed, never with the token.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from dulwich.bundle import read_bundle
from dulwich.errors import GitProtocolError, HangupException
from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.pack import PackData, PackInflater
from dulwich.protocol import Protocol, extract_capabilities, pkt_line
from dulwich.refs import Ref, check_ref_format

from openagents.git import ClonedRepository, GitHostError
from openagents.git.pack_guard import check_inflation

USERNAME = "x-access-token"
ZERO_ID = "0" * 40
AGENT = "agent=openagents"
USER_AGENT = "openagents-control-plane"
CONNECT_TIMEOUT_SECONDS = 5.0
BUNDLE_HEADER = b"# v2 git bundle\n"
REDACTED = "***"
CHUNK_BYTES = 1 << 16
# what a sandbox's pack may inflate to (GitHub refuses files over 100 MiB anyway)
MAX_OBJECT_BYTES = 128 << 20
MAX_INFLATED_BYTES = 2 << 30


@dataclass(frozen=True)
class Remote:
    """A repository's smart HTTP URL (``https://host/owner/name.git``, no credentials in it)
    and the token its requests carry (None: anonymous)."""

    url: str
    token: str | None = field(repr=False)
    timeout_seconds: float = 60.0
    label: str = ""  # how errors name the repository (owner/name)

    @property
    def name(self) -> str:
        return self.label or self.url


@dataclass(frozen=True)
class Advertised:
    """What a remote says it has: ref → commit, its capabilities and the branch HEAD names."""

    refs: dict[str, str]
    capabilities: frozenset[str]
    head: str | None


@dataclass(frozen=True)
class PushBundle:
    """A sandbox's push, checked: the one ref, its commit, the commits it needs (empty: the
    whole branch) and, for a whole bundle, every commit's parents."""

    ref: str
    commit: str
    prerequisites: frozenset[str]
    pack: bytes = field(repr=False)
    parents: dict[str, tuple[str, ...]] = field(repr=False)


# ---------------------------------------------------------------------------- push


def push_bundle(remote: Remote, *, branch: str, bundle: bytes, force: bool) -> str:
    """Push ``refs/heads/<branch>`` from a sandbox's bundle to ``remote``; returns its commit."""
    ref = branch_ref(branch)
    checked = read_push_bundle(bundle, ref)
    with _client(remote) as client:
        advertised = _advertised(client, remote, "git-receive-pack")
        missing = checked.prerequisites - set(advertised.refs.values())
        if missing:
            raise GitHostError(
                f"{remote.name} lacks the bundle's base commits; send the whole branch",
                status=412,
            )
        old = advertised.refs.get(ref)
        if old == checked.commit:
            return old  # already there: nothing to send
        if old is not None and not force and not _fast_forward(checked, old):
            if checked.prerequisites:  # a thin bundle cannot show it; the whole branch can
                raise GitHostError(
                    f"A thin bundle cannot show {branch} fast-forwards; send the whole branch",
                    status=412,
                )
            raise GitHostError(f"Push to {branch} refused (non-fast-forward)", status=409)
        wanted = ("report-status", "ofs-delta")
        capabilities = " ".join([c for c in wanted if c in advertised.capabilities] + [AGENT])
        command = f"{old or ZERO_ID} {checked.commit} {ref}".encode()
        body = pkt_line(command + b"\0" + capabilities.encode()) + pkt_line(None) + checked.pack
        response = _send(
            client,
            remote,
            "POST",
            f"{remote.url}/git-receive-pack",
            content=body,
            headers={
                "Content-Type": "application/x-git-receive-pack-request",
                "Accept": "application/x-git-receive-pack-result",
            },
        )
        _require_ok(response, remote, f"pushing {branch}")
        if "report-status" in advertised.capabilities:
            _require_reported(response.content, ref, branch, remote)
    return checked.commit


def read_push_bundle(data: bytes, ref: str) -> PushBundle:
    """Parse and check a sandbox's bundle: exactly ``ref``, a pack that verifies (a whole
    bundle's deltas all resolve and its tip is among its commits)."""
    if not data.startswith((BUNDLE_HEADER, b"# v3 git bundle\n")) or b"\n\n" not in data:
        raise GitHostError("The bundle does not verify: not a git bundle", status=400)
    pack = data[data.index(b"\n\n") + 2 :]
    # before dulwich holds any object in memory: a bomb is refused by its sizes alone
    check_inflation(pack, max_object=MAX_OBJECT_BYTES, max_total=MAX_INFLATED_BYTES)
    try:
        parsed = read_bundle(io.BytesIO(data))
    except (AssertionError, ValueError, KeyError, IndexError) as exc:
        raise _unverified(exc) from None
    refs = {
        name.decode("utf-8", "replace"): sha.decode("ascii", "replace")
        for name, sha in parsed.references.items()
    }
    if list(refs) != [ref]:
        named = ", ".join(refs) or "none"
        raise GitHostError(f"The bundle may update only {ref}, not: {named}", status=403)
    prerequisites = frozenset(sha.decode("ascii", "replace") for sha, _ in parsed.prerequisites)
    pack_data = parsed.pack_data
    if not isinstance(pack_data, PackData):  # pragma: no cover - read_bundle makes a PackData
        raise GitHostError("The bundle does not verify: no pack", status=400)
    parents = _verified_commits(pack_data, whole=not prerequisites)
    parsed.close()
    commit = refs[ref]
    if not prerequisites and commit not in parents:
        raise GitHostError(f"The bundle does not verify: {ref} is not in it", status=400)
    return PushBundle(
        ref=ref, commit=commit, prerequisites=prerequisites, pack=pack, parents=parents
    )


def _verified_commits(pack: PackData, *, whole: bool) -> dict[str, tuple[str, ...]]:
    """The pack's checksum and every entry checked; a whole pack's objects all inflated (its
    commits and their parents returned). A thin pack's deltas name objects only the remote
    has: the remote checks those."""
    try:
        pack.check()
        parents: dict[str, tuple[str, ...]] = {}
        count = 0
        if not whole:  # every entry read and inflated, deltas left for the remote
            count = sum(1 for _ in pack.iter_unpacked())
        else:  # every object resolved (inflating reads every entry too)
            for obj in PackInflater.for_pack_data(pack):
                count += 1
                if obj.type_name == b"commit":
                    commit_parents = getattr(obj, "parents", [])
                    parents[obj.id.decode()] = tuple(p.decode() for p in commit_parents)
        if count != len(pack):
            raise ValueError("short pack")
        return parents
    except Exception as exc:  # whatever a hostile pack makes dulwich raise
        raise _unverified(exc) from None


def _unverified(exc: BaseException) -> GitHostError:
    return GitHostError(f"The bundle does not verify: {type(exc).__name__}", status=400)


def _fast_forward(bundle: PushBundle, old: str) -> bool:
    """``old`` is an ancestor of the bundle's commit: a thin bundle's prerequisite (each is a
    parent of a commit the bundle holds), or reached walking a whole bundle's history."""
    if old in bundle.prerequisites:
        return True
    seen: set[str] = set()
    todo = [bundle.commit]
    while todo:
        commit = todo.pop()
        if commit == old:
            return True
        if commit in seen:
            continue
        seen.add(commit)
        todo.extend(bundle.parents.get(commit, ()))
    return False


def _require_reported(report: bytes, ref: str, branch: str, remote: Remote) -> None:
    """receive-pack's report: ``unpack ok`` then ``ok <ref>`` (or ``ng <ref> <reason>``)."""
    lines = [line.decode("utf-8", "replace").rstrip("\n") for line in _pkt_lines(report)]
    unpack = next((line for line in lines if line.startswith("unpack ")), None)
    if unpack != "unpack ok":
        reason = unpack.removeprefix("unpack ") if unpack else "no report"
        raise GitHostError(
            _scrub(f"{remote.name} refused the bundle's objects: {reason}", remote), status=400
        )
    if f"ok {ref}" in lines:
        return
    refused = next((line for line in lines if line.startswith(f"ng {ref} ")), None)
    reason = refused.removeprefix(f"ng {ref} ") if refused else "no status for the branch"
    raise GitHostError(_scrub(f"Push to {branch} refused: {reason}", remote), status=409)


# ---------------------------------------------------------------------------- clone


def clone_bundle(
    remote: Remote, *, branch: str | None, is_new_branch: bool, max_bytes: int
) -> ClonedRepository:
    """Fetch the default branch (and ``branch`` when the remote has it) into a temporary
    directory and make the bundle a sandbox restores: origin's tracking refs plus the branch it
    checks out (``branch``; a new one starts at the default branch; None: the default)."""
    with _client(remote) as client:
        advertised = _advertised(client, remote, "git-upload-pack")
        default = advertised.head
        if default is None or branch_ref(default) not in advertised.refs:
            raise GitHostError(f"{remote.name} is empty: nothing to clone", status=422)
        checkout = branch or default
        remote_commit = advertised.refs.get(branch_ref(checkout))
        if is_new_branch and remote_commit is not None:
            raise GitHostError(f"Branch {checkout!r} already exists on the remote", status=409)
        if not is_new_branch and remote_commit is None:
            raise GitHostError(f"Branch {checkout!r} not found on {remote.name}", status=422)
        tracked = {name: advertised.refs[branch_ref(name)] for name in {default, checkout}
                   if branch_ref(name) in advertised.refs}  # fmt: skip
        head = tracked[default] if is_new_branch else tracked[checkout]
        refs = {f"refs/remotes/origin/{name}": sha for name, sha in sorted(tracked.items())}
        refs[branch_ref(checkout)] = head
        with tempfile.TemporaryDirectory(prefix="openagents-clone-") as tmp:
            pack_path = Path(tmp) / "fetched.pack"
            _fetch_pack(client, remote, advertised, set(tracked.values()), pack_path, max_bytes)
            bundle = _bundle(refs, pack_path)
    return ClonedRepository(
        bundle=bundle,
        branch=checkout,
        head=head,
        default_branch=default,
        upstream=None if is_new_branch else f"origin/{checkout}",
    )


def _fetch_pack(
    client: httpx.Client,
    remote: Remote,
    advertised: Advertised,
    wants: set[str],
    path: Path,
    max_bytes: int,
) -> None:
    """``git-upload-pack``: want the commits, have nothing, done; the answer is ``NAK`` then
    the pack (no side band), written to ``path`` up to ``max_bytes`` and then checked."""
    capabilities = " ".join([c for c in ("ofs-delta",) if c in advertised.capabilities] + [AGENT])
    lines = [
        pkt_line(f"want {sha}{' ' + capabilities if i == 0 else ''}\n".encode())
        for i, sha in enumerate(sorted(wants))
    ]
    body = b"".join([*lines, pkt_line(None), pkt_line(b"done\n")])
    headers = {
        "Content-Type": "application/x-git-upload-pack-request",
        "Accept": "application/x-git-upload-pack-result",
    }
    url = f"{remote.url}/git-upload-pack"
    try:
        with client.stream("POST", url, content=body, headers=headers) as response:
            if not response.is_success:
                response.read()
                _require_ok(response, remote, "fetching")
            with path.open("wb") as out:
                size = 0
                for chunk in response.iter_bytes(CHUNK_BYTES):
                    size += len(chunk)
                    if size > max_bytes + 8:
                        raise GitHostError(
                            f"{remote.name} is larger than the clone limit of {max_bytes} bytes",
                            status=413,
                        )
                    out.write(chunk)
    except httpx.HTTPError as exc:
        raise GitHostError(_scrub(f"Fetching {remote.name} failed: {exc}", remote)) from None
    _check_fetched(path, remote)


def _check_fetched(path: Path, remote: Remote) -> None:
    with path.open("rb") as handle:
        if handle.read(8) != pkt_line(b"NAK\n"):
            raise GitHostError(f"{remote.name} answered the fetch with no pack", status=502)
        try:
            pack = PackData.from_file(io.BytesIO(handle.read()), DEFAULT_OBJECT_FORMAT)
            pack.check()
            pack.close()
        except Exception as exc:  # a broken pack from the remote
            raise GitHostError(
                f"{remote.name} sent a pack that does not verify: {type(exc).__name__}",
                status=502,
            ) from None


def _bundle(refs: dict[str, str], pack_path: Path) -> bytes:
    """A v2 bundle: the refs, no prerequisites (the pack is whole), the fetched pack as it is."""
    header = BUNDLE_HEADER + b"".join(f"{sha} {ref}\n".encode() for ref, sha in refs.items())
    with pack_path.open("rb") as handle:
        handle.seek(8)  # past NAK
        return header + b"\n" + handle.read()


# ---------------------------------------------------------------------------- the protocol


def branch_ref(branch: str) -> str:
    """``refs/heads/<branch>``; an invalid branch name is a 400."""
    ref = f"refs/heads/{branch}"
    if branch.startswith("-") or not check_ref_format(Ref(ref.encode())):
        raise GitHostError(f"Invalid branch name: {branch!r}", status=400)
    return ref


def _client(remote: Remote) -> httpx.Client:
    auth = httpx.BasicAuth(USERNAME, remote.token) if remote.token else None
    return httpx.Client(
        auth=auth,
        timeout=httpx.Timeout(remote.timeout_seconds, connect=CONNECT_TIMEOUT_SECONDS),
        headers={"User-Agent": USER_AGENT, "Git-Protocol": "version=0"},
        follow_redirects=False,
    )


def _send(
    client: httpx.Client,
    remote: Remote,
    method: str,
    url: str,
    *,
    params: dict[str, str] | None = None,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    try:
        return client.request(method, url, params=params, content=content, headers=headers)
    except httpx.HTTPError as exc:
        raise GitHostError(_scrub(f"{remote.name} could not be reached: {exc}", remote)) from None


def _advertised(client: httpx.Client, remote: Remote, service: str) -> Advertised:
    url = f"{remote.url}/info/refs"
    response = _send(client, remote, "GET", url, params={"service": service})
    _require_ok(response, remote, "listing its refs")
    if response.headers.get("content-type", "") != f"application/x-{service}-advertisement":
        raise GitHostError(f"{remote.name} is not a smart HTTP git server", status=502)
    lines = list(_pkt_lines(response.content))
    if not lines or lines[0].rstrip(b"\n") != f"# service={service}".encode():
        raise GitHostError(f"{remote.name} sent an unreadable ref list", status=502)
    refs: dict[str, str] = {}
    capabilities: list[bytes] = []
    for index, line in enumerate(lines[1:]):
        text, found = extract_capabilities(line) if index == 0 else (line, [])
        capabilities += found
        sha, _, name = text.rstrip(b"\n").partition(b" ")
        if name and name != b"capabilities^{}" and not name.endswith(b"^{}"):
            refs[name.decode("utf-8", "replace")] = sha.decode("ascii", "replace")
    names = frozenset(c.decode("utf-8", "replace") for c in capabilities)
    head = next(
        (c.removeprefix("symref=HEAD:") for c in names if c.startswith("symref=HEAD:")), None
    )
    return Advertised(
        refs=refs,
        capabilities=frozenset(c.split("=", 1)[0] for c in names),
        head=head.removeprefix("refs/heads/") if head else None,
    )


def _pkt_lines(data: bytes) -> Iterator[bytes]:
    """Every pkt-line's payload in ``data`` (flushes skipped); a garbled line ends it."""
    proto = Protocol(io.BytesIO(data).read, lambda _: None)
    while True:
        try:
            line = proto.read_pkt_line()
        except (HangupException, GitProtocolError, ValueError):
            return
        if line is not None:
            yield line


def _require_ok(response: httpx.Response, remote: Remote, what: str) -> None:
    status = response.status_code
    if response.is_success:
        return
    if status == 401:
        message = f"The git host rejected the credentials ({what} {remote.name})"
    elif status == 404:
        message = f"Repository {remote.name} not found ({what})"
    elif status == 403:
        message = f"The git host refused access to {remote.name} ({what})"
    elif 300 <= status < 400:
        message = f"{remote.name} redirected ({what}); not followed"
    else:
        detail = response.text[:300].strip()
        message = f"{remote.name} failed ({what}): {status} {detail}".rstrip()
    raise GitHostError(_scrub(message, remote), status=status)


def _scrub(text: str, remote: Remote, extra: Iterable[str] = ()) -> str:
    for secret in (remote.token, *extra):
        if secret:
            text = text.replace(secret, REDACTED)
    return text
