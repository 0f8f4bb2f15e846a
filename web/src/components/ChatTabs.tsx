import { WorkingBadge } from "./Sidebar";
import { useState, type FormEvent } from "react";
import type { Chat } from "../api/client";
import { ConfirmDialog } from "./ConfirmDialog";
import { UnreadDot } from "./UnreadDot";
import { TabList } from "./TabList";

interface Props {
  chats: Chat[];
  activeId: string;
  onSelect: (chatId: string) => void;
  onCreate: () => void;
  onRename: (chatId: string, title: string) => void;
  onDelete: (chatId: string) => void;
  /** An archived session: the chats are read-only (no new, rename or delete). */
  archived?: boolean;
}

function RenameForm({
  chat,
  onSave,
  onCancel,
}: {
  chat: Chat;
  onSave: (title: string) => void;
  onCancel: () => void;
}) {
  const [title, setTitle] = useState(chat.title);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const trimmed = title.trim();
    if (trimmed && trimmed !== chat.title) onSave(trimmed);
    else onCancel();
  };
  return (
    <form className="rename" onSubmit={submit} onKeyDown={(event) => event.key === "Escape" && onCancel()}>
      <label htmlFor="chat-title">Chat title</label>
      <input
        id="chat-title"
        value={title}
        onChange={(event) => setTitle(event.target.value)}
        maxLength={200}
        autoFocus
      />
      <button type="submit">Save</button>
      <button type="button" onClick={onCancel}>
        Cancel
      </button>
    </form>
  );
}

/** The session's chats as tabs, with new / rename / delete (the only chat cannot be deleted). */
export function ChatTabs({
  chats,
  activeId,
  onSelect,
  onCreate,
  onRename,
  onDelete,
  archived = false,
}: Props) {
  const [renaming, setRenaming] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const active = chats.find((chat) => chat.id === activeId);
  const tabs = chats.map((chat) => ({
    id: chat.id,
    name:
      chat.isStreaming || chat.hasUnread
        ? [chat.title, chat.isStreaming && "working", chat.hasUnread && "unread"].filter(Boolean).join(", ")
        : undefined,
    title: chat.title,
    label: (
      <>
        {chat.hasUnread && <UnreadDot />}
        <span className="tab-title">{chat.title}</span>
        {chat.isStreaming && <WorkingBadge />}
      </>
    ),
  }));
  const only = chats.length <= 1;
  return (
    <div className="chat-tabs">
      <TabList label="Chats" prefix="chat" tabs={tabs} selected={activeId} onSelect={onSelect} />
      {!archived && (
        <div className="toolbar">
          <button type="button" onClick={onCreate}>
            New chat
          </button>
          <button type="button" onClick={() => setRenaming(true)} disabled={!active}>
            Rename chat
          </button>
          <button
            type="button"
            onClick={() => setDeleting(true)}
            disabled={only}
            title={only ? "The only chat of a session cannot be deleted" : undefined}
          >
            Delete chat
          </button>
        </div>
      )}
      {renaming && active && !archived && (
        <RenameForm
          chat={active}
          onCancel={() => setRenaming(false)}
          onSave={(title) => {
            setRenaming(false);
            onRename(active.id, title);
          }}
        />
      )}
      {deleting && active && (
        <ConfirmDialog
          title="Delete chat"
          message={`Delete “${active.title}” and all of its messages?`}
          confirmLabel="Delete chat"
          onCancel={() => setDeleting(false)}
          onConfirm={() => {
            setDeleting(false);
            onDelete(active.id);
          }}
        />
      )}
    </div>
  );
}
