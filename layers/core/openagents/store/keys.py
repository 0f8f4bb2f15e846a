"""Every key of the single table, one function per kind of item: the store's and the run
store's. A ``*_key`` function gives an item's whole key ``(pk, sk)``; a ``*_pk`` function a
partition that is queried, with the sort-key prefixes a query selects on. The sort keys the
SQLite adapter orders and pages by too (``created_key``, ``event_sk``, ``message_sk``) are here
as well. No PynamoDB here: the SQLite adapter imports this module.

| item | pk | sk |
|---|---|---|
| session | ``S#<sessionId>`` | ``SESSION`` |
| chat | ``S#<sessionId>`` | ``C#<chatId>`` |
| audit entry | ``S#<sessionId>`` | ``E#<iso time>#<id>`` |
| outbox event | ``S#<sessionId>`` | ``O#<iso time>#<entry id>`` (TTL) |
| message | ``C#<sessionId>#<chatId>`` | ``M#<epoch ms, 13 digits>#<messageId>`` |
| message segment | ``C#<sessionId>#<chatId>`` | ``MS#<epoch ms>#<messageId>#<n, 6 digits>`` |
| chat id claim | ``CID#<userId, %-escaped>#<chatId>`` | ``CID`` |
| message id claim | ``MID#<userId, %-escaped>#<messageId>`` | ``MID`` |
| share link | ``SH#<shareId>`` | ``SHARE`` |
| public preview | ``S#<sessionId>`` | ``PV#<port, 5 digits>`` |
| user profile | ``U#<userId>`` | ``PROFILE`` |
| title registry | ``U#<userId>`` | ``T#<title>`` |
| rate window | ``U#<userId>`` | ``R#<action>`` (TTL) |
| webhook delivery | ``D#<delivery id>`` | ``DELIVERY`` (TTL) |
| tombstone | ``PURGE`` | ``S#<sessionId>`` / ``C#<sessionId>#<chatId>`` |
| run | ``RUN#<runId>`` | ``RUN`` (the run as JSON, ``version`` for optimistic writes) |
| a session's runs | ``RSESS#<sessionId>`` | ``<started iso>#<runId>`` (``runs.started_key``) |
| a user's runs | ``RUSER#<userId, %-escaped>`` | ``<started iso>#<runId>`` (usage reads) |
| a chat's run claim | ``RCHAT#<sessionId>#<chatId>`` | ``CLAIM`` (``activeRunId``, ``lastRunId``) |
| message → run | ``RMSG#<sessionId>#<chatId>#<messageId>`` | ``RMSG`` |
| live runs | ``RLIVE#<0..15>`` (a shard by run id) | ``<runId>`` (removed when the run ends) |
| stream event | ``REV#<runId>`` | ``<seq, 10 digits>`` (``expiresAt``: the table's TTL) |

Chat and message ids are chosen by clients, so they are unique per user, never across users:
their claims are keyed by the user, and everything else under a chat by its session and id
(another user's same id is theirs, and never answers that it is taken).
"""

from __future__ import annotations

import re
import zlib
from urllib.parse import quote

from openagents.domain.models import AuditEntry, Message, Session
from openagents.store.shared import iso

Key = tuple[str, str]  # (pk, sk)

SESSION_SK = "SESSION"
PURGE_PK = "PURGE"  # the tombstones' partition: one Query lists what deletes left
SESSION_PREFIX = "S#"  # a session's partition; a session's tombstone
CHAT_PREFIX = "C#"  # a chat under its session; a chat's tombstone
EVENT_PREFIX = "E#"
OUTBOX_PREFIX = "O#"  # the outbox items' sort keys (the pipe's filter matches this prefix)
MESSAGE_PREFIX = "M#"
SEGMENT_PREFIX = "MS#"  # never a message's: "MS#" does not start with "M#"
TITLE_PREFIX = "T#"
USER_PREFIX = "U#"  # a user's partition: profile, titles, rate windows
RATE_PREFIX = "R#"
PROFILE_SK = "PROFILE"
LIVE_SHARDS = 16  # live runs spread over partitions: every start and end writes one

CREATED_KEY = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00#[\w-]{1,64}")
MESSAGE_SK = re.compile(r"M#\d{13}#[^\s]{1,200}")
EVENT_SK = re.compile(r"E#\d{4}-\d\d-\d\dT[\d:.]+\+00:00#[\w-]{1,64}")


def user_scoped(user_id: str, client_id: str) -> str:
    """A client-chosen id as its user's own (``<user, %-escaped>#<id>``): another user may
    choose the same id, and must not learn that it is taken."""
    return f"{quote(user_id, safe='')}#{client_id}"


def chat_scoped(session_id: str, chat_id: str) -> str:
    """A chat as one key (``<session>#<chat>``: server ids and chat ids hold no ``#``)."""
    return f"{session_id}#{chat_id}"


# ----------------------------------------------------------------- a session's partition


def session_pk(session_id: str) -> str:
    return f"{SESSION_PREFIX}{session_id}"


def session_id_of(pk: str) -> str:
    """The session of a session partition's key (``session_pk``'s inverse)."""
    return pk.removeprefix(SESSION_PREFIX)


def session_key(session_id: str) -> Key:
    return session_pk(session_id), SESSION_SK


def chat_sk(chat_id: str) -> str:
    return f"{CHAT_PREFIX}{chat_id}"


def chat_key(session_id: str, chat_id: str) -> Key:
    return session_pk(session_id), chat_sk(chat_id)


def event_sk(entry: AuditEntry) -> str:
    return f"{EVENT_PREFIX}{iso(entry.at)}#{entry.id}"


def event_key(entry: AuditEntry) -> Key:
    return session_pk(entry.session_id), event_sk(entry)


def outbox_key(entry: AuditEntry) -> Key:
    """``O#<iso time>#<entry id>``: a session's events sort as its audit entries do."""
    return session_pk(entry.session_id), f"{OUTBOX_PREFIX}{iso(entry.at)}#{entry.id}"


def created_key(session: Session) -> str:
    """The list indexes' sort key (and the SQLite lists' order)."""
    return f"{iso(session.created_at)}#{session.id}"


# -------------------------------------------------------------------- messages and claims


def messages_pk(session_id: str, chat_id: str) -> str:
    """The partition of a chat's messages."""
    return f"{CHAT_PREFIX}{chat_scoped(session_id, chat_id)}"


def message_sk(message: Message) -> str:
    return f"{MESSAGE_PREFIX}{int(message.created_at.timestamp() * 1000):013d}#{message.id}"


def segment_sk(message_sk: str, n: int) -> str:
    """The sort key of a message's ``n``-th segment (``shared.Segment``), in its partition:
    a message's segments sort together, in the order they were written."""
    return f"{segments_prefix(message_sk)}{n:06d}"


def segments_prefix(message_sk: str) -> str:
    return f"{SEGMENT_PREFIX}{message_sk.removeprefix(MESSAGE_PREFIX)}#"


def message_key(session_id: str, chat_id: str, message: Message) -> Key:
    return messages_pk(session_id, chat_id), message_sk(message)


def chat_claim_key(user_id: str, chat_id: str) -> Key:
    """A user's claim of a chat id (chat ids are unique per user, across their sessions)."""
    return f"CID#{user_scoped(user_id, chat_id)}", "CID"


def message_claim_key(user_id: str, message_id: str) -> Key:
    """A user's claim of a message id (unique per user, across their chats)."""
    return f"MID#{user_scoped(user_id, message_id)}", "MID"


def share_key(share_id: str) -> Key:
    return f"SH#{share_id}", "SHARE"


PREVIEW_PREFIX = "PV#"


def preview_key(session_id: str, port: int) -> Key:
    """A public preview, in its session's partition (purged with it)."""
    return session_pk(session_id), f"{PREVIEW_PREFIX}{port:05d}"


def delivery_key(delivery_id: str) -> Key:
    return f"D#{delivery_id}", "DELIVERY"


# ------------------------------------------------------------------------ a user's partition


def user_pk(user_id: str) -> str:
    return f"{USER_PREFIX}{user_id}"


def profile_key(user_id: str) -> Key:
    return user_pk(user_id), PROFILE_SK


def title_key(user_id: str, title: str) -> Key:
    return user_pk(user_id), f"{TITLE_PREFIX}{title}"


def title_of(sk: str) -> str:
    """The title a registry item holds (``title_key``'s inverse)."""
    return sk.removeprefix(TITLE_PREFIX)


def rate_key(user_id: str, action: str) -> Key:
    return user_pk(user_id), f"{RATE_PREFIX}{action}"


# -------------------------------------------------------------------------------- tombstones


def session_tombstone_key(session_id: str) -> Key:
    return PURGE_PK, f"{SESSION_PREFIX}{session_id}"


def chat_tombstone_key(session_id: str, chat_id: str) -> Key:
    return PURGE_PK, f"{CHAT_PREFIX}{chat_scoped(session_id, chat_id)}"


def is_session_tombstone(sk: str) -> bool:
    return sk.startswith(SESSION_PREFIX)


# -------------------------------------------------------------------------------------- runs


def run_key(run_id: str) -> Key:
    return f"RUN#{run_id}", "RUN"


def session_runs_pk(session_id: str) -> str:
    """A session's runs, sorted by ``runs.started_key``."""
    return f"RSESS#{session_id}"


def user_runs_pk(user_id: str) -> str:
    """A user's runs across sessions, sorted by ``runs.started_key`` (the usage page)."""
    return f"RUSER#{quote(user_id, safe='')}"


def run_claim_key(session_id: str, chat_id: str) -> Key:
    return f"RCHAT#{chat_scoped(session_id, chat_id)}", "CLAIM"


def message_run_key(session_id: str, chat_id: str, message_id: str) -> Key:
    """The run a user message started (message ids are last: they may hold ``#``)."""
    return f"RMSG#{chat_scoped(session_id, chat_id)}#{message_id}", "RMSG"


def live_pk(shard: int) -> str:
    return f"RLIVE#{shard}"


def live_key(run_id: str) -> Key:
    return live_pk(zlib.crc32(run_id.encode()) % LIVE_SHARDS), run_id


def run_events_pk(run_id: str) -> str:
    return f"REV#{run_id}"


def run_event_key(run_id: str, seq: int) -> Key:
    return run_events_pk(run_id), f"{seq:010d}"
