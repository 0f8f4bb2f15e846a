"""The DynamoDB store's writes that more than one port composes into one transaction (the unit
of work is ``transaction.Transaction``, a TransactWriteItems builder): a message's insert with
what it changes on its chat and session. ``DynamoStore.put_message`` and ``DynamoRunStore.start``
(the run, its claim and marks, and the user message, in one transaction) both add it."""

from __future__ import annotations

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from openagents.domain.models import Chat, Message, Session
from openagents.store.items import ChatItem, MessageClaimItem, MessageItem, SessionItem, Table
from openagents.store.keys import (
    chat_key,
    message_claim_key,
    message_sk,
    messages_pk,
    session_key,
)
from openagents.store.mapping import set_or_remove
from openagents.store.port import Activity
from openagents.store.shared import iso, message_insert
from openagents.store.transaction import Transaction


def insert_message(
    tx: Transaction,
    table: Table,
    session: Session,
    chat: Chat,
    message: Message,
    body: str | None,
    body_ref: str | None,
    activity: Activity | None,
    size: int | None = None,
) -> bool:
    """Add the message's writes to ``tx``: its id claim (``message id``: refused when taken),
    its item, its chat's count and times (``chat``; a first message names the chat, on the
    condition that it still has none — True then) and its session's mark and activity
    (``session``)."""
    insert = message_insert(chat, message, activity)
    now = iso(insert.at)
    sort_key = message_sk(message)
    chat_actions: list[Action] = [
        ChatItem.updated_at.set(now),
        ChatItem.message_count.add(1),
    ]
    mark = SessionItem.chats[chat.id]
    session_actions: list[Action] = [mark["updatedAt"].set(now)]
    if insert.assistant:
        chat_actions.append(ChatItem.last_assistant_message_at.set(now))
        session_actions.append(mark["lastAssistantMessageAt"].set(now))
    if activity is not None:
        session_actions += [
            SessionItem.last_activity_at.set(iso(activity.at)),
            SessionItem.hibernate_after.set(iso(activity.hibernate_after)),
            set_or_remove("due_at", activity.due_at),
            set_or_remove("due_shard", activity.due_shard),
        ]
    chat_condition: Condition = ChatItem.pk.exists()
    if insert.title is not None:
        chat_actions.append(ChatItem.title.set(insert.title))
        chat_condition &= ChatItem.message_count == 0
    tx.save(
        table[MessageClaimItem](
            *message_claim_key(session.user_id, message.id),
            chat_id=chat.id,
            role=message.role.value,
            message_sk=sort_key,
        ),
        condition=MessageClaimItem.pk.does_not_exist(),
        name="message id",
    )
    tx.save(
        table[MessageItem](
            messages_pk(session.id, chat.id),
            sort_key,
            id=message.id,
            chat_id=chat.id,
            role=message.role.value,
            body=body,
            body_ref=body_ref,
            created_at=now,
            size=size,
        )
    )
    tx.update(
        table[ChatItem](*chat_key(session.id, chat.id)),
        actions=chat_actions,
        condition=chat_condition,
        name="chat",
    )
    tx.update(
        table[SessionItem](*session_key(session.id)),
        actions=session_actions,
        condition=mark.exists(),
        name="session",
    )
    return insert.title is not None


def message_claim(table: Table, user_id: str, message_id: str) -> MessageClaimItem | None:
    """The user's claim of a message id (consistent: a message just written is found)."""
    try:
        return table[MessageClaimItem].get(
            *message_claim_key(user_id, message_id), consistent_read=True
        )
    except MessageClaimItem.DoesNotExist:
        return None
