"""A dev server comes back after archive and unarchive (real confined sandbox): its record rides
the archive's bundle on a hidden ref (``refs/openagents/services/dev-server``), and the
unarchived sandbox starts it again on the same preview URL. Archiving ends the session's public
previews: their links answer 401 while archived, and after the unarchive too."""

from __future__ import annotations

from urllib.parse import urlsplit

from openagents.domain.models import LifecycleState, Session, SessionStatus

from tests.integration.test_archive import finalized, wait_until
from tests.integration.test_previews import ALICE, SERVER_JS, Live, live, wait_listed

__all__ = ["live"]  # the fixture


def active_or_failed(session: Session) -> bool:
    return session.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.FAILED)


def test_a_dev_server_answers_on_its_preview_url_after_archive_and_unarchive(live: Live) -> None:
    live.run(
        "mkdir -p app/node_modules && cd app && "
        """printf '{"scripts": {"dev": "node server.js"}}' > package.json && """
        f"cat > server.js <<'EOF'\n{SERVER_JS}\nEOF"
    )
    base = f"/api/sessions/{live.session_id}"
    made = live.api.post(f"{base}/dev-server", {"path": "app"})
    assert made.status == 200, made.body
    url = urlsplit(made.body["url"])
    host = url.hostname or ""
    redeemed = live.client.get(f"{url.path}?{url.query}", headers={"host": host})
    cookie = redeemed.headers["set-cookie"].split(";", 1)[0]
    assert live.client.get("/", headers={"host": host, "cookie": cookie}).text == "from node 3000"
    public = live.api.post(f"{base}/ports/3000/preview", {"visibility": "public"})
    assert public.status == 200, public.body
    link = urlsplit(public.body["url"])
    stranger = live.client.get(f"{link.path}?{link.query}", headers={"host": host})
    public_cookie = stranger.headers["set-cookie"].split(";", 1)[0]
    assert live.client.get("/", headers={"host": host, "cookie": public_cookie}).status_code == 200

    sessions = live.container.sessions
    sessions.update(ALICE, live.session_id, title=None, status=SessionStatus.ARCHIVED)
    done = wait_until(live.container, live.session_id, finalized, limit=120)
    assert done.bundle is not None
    assert done.snapshot is None  # nothing of .git/openagents survives but the bundle's refs
    refused = live.client.get("/", headers={"host": host, "cookie": public_cookie})
    assert refused.status_code == 401  # archived: the public preview is over

    sessions.update(ALICE, live.session_id, title=None, status=SessionStatus.RUNNING)
    back = wait_until(live.container, live.session_id, active_or_failed, limit=120)
    assert back.lifecycle_state is LifecycleState.ACTIVE, back.lifecycle_error
    assert back.sandbox_generation > done.sandbox_generation
    wait_listed(live, 3000)  # started again by the unarchived sandbox, not by us
    page = live.client.get("/", headers={"host": host, "cookie": cookie})
    assert page.text == "from node 3000"  # the owner's cookie, the same preview URL
    assert live.api.get(f"{base}/dev-server").body["running"] is True
    # the public link stays revoked: a new one must be asked for
    assert live.client.get("/", headers={"host": host, "cookie": public_cookie}).status_code == 401
    assert live.api.get(f"{base}/previews").body == {"previews": []}

    kept = live.run("git for-each-ref --format='%(refname)' refs/openagents/services").stdout
    assert kept.split() == ["refs/openagents/services/dev-server"]  # what brought it back
    # stopped, the record is gone from the ref too: nothing comes back the next time
    assert live.api.delete(f"{base}/dev-server").status == 200
    refs = live.run("git for-each-ref refs/openagents/services").stdout
    assert refs == ""
