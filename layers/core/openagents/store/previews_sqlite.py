"""The SQLite adapter's public previews (``PreviewStore``): a table keyed by session and port,
its rows deleted with their session (``SqliteStore.delete_session``)."""

from __future__ import annotations

from openagents.domain.previews import PublicPreview
from openagents.store.shared import iso, parse_dt
from openagents.store.sqlite_schema import Database, guard

COLUMNS = "session_id, port, user_id, secret, created_at"


def _preview(row: tuple[str, int, str, str, str]) -> PublicPreview:
    created = parse_dt(row[4])
    assert created is not None
    return PublicPreview(row[0], int(row[1]), row[2], row[3], created)


class SqlitePreviews:
    """Mixed into ``SqliteStore`` (it holds ``db``)."""

    db: Database

    @guard
    def publish_preview(self, preview: PublicPreview) -> PublicPreview:
        with self.db.transaction() as db:
            db.execute(
                f"INSERT OR IGNORE INTO public_previews ({COLUMNS}) VALUES (?, ?, ?, ?, ?)",  # noqa: S608 - our columns
                (preview.session_id, preview.port, preview.user_id, preview.secret,
                 iso(preview.created_at)),
            )  # fmt: skip
            row = db.execute(
                f"SELECT {COLUMNS} FROM public_previews WHERE session_id = ? AND port = ?",  # noqa: S608
                (preview.session_id, preview.port),
            ).fetchone()
        return _preview(row)

    @guard
    def public_preview(self, session_id: str, port: int) -> PublicPreview | None:
        row = (
            self.db.connection()
            .execute(
                f"SELECT {COLUMNS} FROM public_previews WHERE session_id = ? AND port = ?",  # noqa: S608
                (session_id, port),
            )
            .fetchone()
        )
        return None if row is None else _preview(row)

    @guard
    def public_previews(self, session_id: str) -> list[PublicPreview]:
        rows = self.db.connection().execute(
            f"SELECT {COLUMNS} FROM public_previews WHERE session_id = ? ORDER BY port",  # noqa: S608
            (session_id,),
        )
        return [_preview(row) for row in rows]

    @guard
    def revoke_preview(self, session_id: str, port: int) -> bool:
        with self.db.transaction() as db:
            gone = db.execute(
                "DELETE FROM public_previews WHERE session_id = ? AND port = ?", (session_id, port)
            )
            return gone.rowcount > 0
