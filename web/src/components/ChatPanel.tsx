import { useEffect, useLayoutEffect, useRef } from "react";
import type { UIMessage } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useMessages } from "../hooks/useMessages";
import { Composer } from "./Composer";

interface Props {
  sessionId: string;
  chatId: string;
  /** After the read marker is set (the sidebar's unread dot may go). */
  onRead: () => void;
  /** After a message is stored (the chat title and the sandbox's idle timer may change). */
  onSent: () => void;
}

function messageText(message: UIMessage): string {
  return message.parts
    .map((part) => (part.type === "text" ? (part.text ?? "") : `[${part.type}]`))
    .join("\n")
    .trim();
}

function newId(): string {
  return crypto.randomUUID();
}

/** One chat: its messages (latest at the bottom, earlier ones on demand) and the composer. */
export function ChatPanel({ sessionId, chatId, onRead, onSent }: Props) {
  const api = useApi();
  const { messages, hidden, error, loading, append, showEarlier } = useMessages(sessionId, chatId);
  const scroller = useRef<HTMLDivElement>(null);
  const fromBottom = useRef<number | null>(null);
  const last = messages[messages.length - 1]?.id;

  useEffect(() => {
    let live = true;
    api.markRead(sessionId, chatId).then(
      () => live && onRead(),
      () => undefined, // the dot stays; nothing else depends on it
    );
    return () => {
      live = false;
    };
  }, [api, sessionId, chatId, onRead]);

  useLayoutEffect(() => {
    const box = scroller.current;
    if (!box) return;
    // showing earlier messages keeps the view where it was; a new last message scrolls to it
    box.scrollTop = fromBottom.current === null ? box.scrollHeight : box.scrollHeight - fromBottom.current;
    fromBottom.current = null;
  }, [last, hidden]);

  const earlier = () => {
    const box = scroller.current;
    if (box) fromBottom.current = box.scrollHeight - box.scrollTop;
    showEarlier();
  };

  const send = async (text: string) => {
    const message: UIMessage = { id: newId(), role: "user", parts: [{ type: "text", text }] };
    await api.postMessage(sessionId, chatId, message);
    append(message);
    onSent();
  };

  return (
    <div className="chat-panel">
      <div className="messages" ref={scroller} role="log" aria-label="Messages">
        {hidden > 0 && (
          <button type="button" className="earlier" onClick={earlier}>
            Show earlier messages ({hidden})
          </button>
        )}
        {loading && <p className="muted">Loading messages…</p>}
        {error !== undefined && <p role="alert">Could not load messages: {errorMessage(error)}</p>}
        {!loading && messages.length === 0 && <p className="muted">No messages yet.</p>}
        <ol className="message-list">
          {messages.map((message) => (
            <li key={message.id} className={`message message-${message.role}`}>
              <span className="message-role">{message.role === "user" ? "You" : "Assistant"}</span>
              <div className="message-text">{messageText(message)}</div>
            </li>
          ))}
        </ol>
      </div>
      <Composer onSend={send} />
    </div>
  );
}
