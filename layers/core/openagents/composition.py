"""The composition root: builds every adapter once, from typed settings, on first use."""

from __future__ import annotations

from dataclasses import dataclass

from openagents.artifacts import ArtifactStore
from openagents.auth.bot import BotPolicy, UserAgentPolicy, WafLabelPolicy
from openagents.auth.tokens import LocalTokens, load_or_create_secret
from openagents.services import Metrics, new_id, utc_now
from openagents.services.chats import ChatService
from openagents.services.sessions import SessionService
from openagents.settings import Mode, Settings
from openagents.store import items
from openagents.store.dynamodb import DynamoStore


@dataclass(frozen=True)
class Container:
    settings: Settings
    sessions: SessionService
    chats: ChatService
    bot_policy: BotPolicy
    local_tokens: LocalTokens | None  # one machine only; AWS trusts the API Gateway authorizer


def local_tokens(settings: Settings) -> LocalTokens:
    secret = load_or_create_secret(settings.jwt_secret_path)
    return LocalTokens(secret, settings.jwt_issuer, settings.jwt_audience)


def _artifacts(settings: Settings) -> ArtifactStore:
    if settings.mode is Mode.LOCAL:
        from openagents.artifacts.folder import FolderArtifactStore

        return FolderArtifactStore(settings.artifacts_dir)
    if not settings.artifact_bucket:
        raise ValueError("OPENAGENTS_ARTIFACT_BUCKET is required in aws mode")
    import boto3

    from openagents.artifacts.s3 import S3ArtifactStore

    return S3ArtifactStore(
        boto3.client("s3", region_name=settings.region), settings.artifact_bucket
    )


def build(settings: Settings, metrics: Metrics) -> Container:
    items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
    store = DynamoStore(_artifacts(settings), settings.inline_message_bytes)
    local = settings.mode is Mode.LOCAL
    return Container(
        settings=settings,
        sessions=SessionService(store, settings, utc_now, new_id, metrics),
        chats=ChatService(store, settings, utc_now, new_id, metrics),
        bot_policy=UserAgentPolicy() if local else WafLabelPolicy(settings.waf_bot_header),
        local_tokens=local_tokens(settings) if local else None,
    )
