"""The DynamoDB adapter's public previews (``PreviewStore``): one item per port in the
session's partition (``keys.preview_key``), so the session's purge removes them."""

from __future__ import annotations

from pynamodb.exceptions import DeleteError, PutError

from openagents.domain.previews import PublicPreview
from openagents.store.items import PreviewItem, Table
from openagents.store.keys import PREVIEW_PREFIX, preview_key, session_pk
from openagents.store.shared import iso, parse_dt
from openagents.store.transaction import guard


def _preview(item: PreviewItem) -> PublicPreview:
    created = parse_dt(item.created_at)
    assert created is not None
    session_id = item.pk.removeprefix("S#")
    port = int(item.sk.removeprefix(PREVIEW_PREFIX))
    return PublicPreview(session_id, port, item.user_id, item.secret, created)


def _conditional_failed(exc: PutError | DeleteError) -> bool:
    return exc.cause_response_code == "ConditionalCheckFailedException"


class DynamoPreviews:
    """Mixed into ``DynamoStore`` (it holds ``_t``)."""

    _t: Table

    @guard
    def publish_preview(self, preview: PublicPreview) -> PublicPreview:
        item = self._t[PreviewItem](
            *preview_key(preview.session_id, preview.port),
            user_id=preview.user_id,
            secret=preview.secret,
            created_at=iso(preview.created_at),
        )
        try:
            item.save(condition=PreviewItem.pk.does_not_exist())
        except PutError as exc:
            if not _conditional_failed(exc):
                raise
            stored = self.public_preview(preview.session_id, preview.port)
            if stored is not None:
                return stored  # it had one already, or a concurrent call won
            return self.publish_preview(preview)  # revoked in between: try again
        return preview

    @guard
    def public_preview(self, session_id: str, port: int) -> PublicPreview | None:
        try:
            item = self._t[PreviewItem].get(*preview_key(session_id, port), consistent_read=True)
        except PreviewItem.DoesNotExist:
            return None
        return _preview(item)

    @guard
    def public_previews(self, session_id: str) -> list[PublicPreview]:
        found = self._t[PreviewItem].query(
            session_pk(session_id),
            PreviewItem.sk.startswith(PREVIEW_PREFIX),
            consistent_read=True,
        )
        return [_preview(item) for item in found]

    @guard
    def revoke_preview(self, session_id: str, port: int) -> bool:
        item = self._t[PreviewItem](*preview_key(session_id, port))
        try:
            item.delete(condition=PreviewItem.pk.exists())
        except DeleteError as exc:
            if not _conditional_failed(exc):
                raise
            return False
        return True
