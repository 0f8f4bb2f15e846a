import { useCallback, useEffect, useRef, useState } from "react";
import type { SharedApi, SharedChat as Transcript } from "../api/client";
import { ApiError } from "../api/http";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";
import type { ViewMessage } from "./agent/message";
import { MessageView } from "./agent/MessageView";

const STATUS_EVERY_MS = 5000;

interface Props {
  shareId: string;
  api: SharedApi;
}

/** The public, read-only page of a shared chat: its transcript, refreshed while a turn runs. */
export function SharedChat({ shareId, api }: Props) {
  const load = useCallback(() => api.transcript(shareId), [api, shareId]);
  const { data, error, reload } = useLoader<Transcript>(load);
  const [streaming, setStreaming] = useState(false);
  const was = useRef(false);
  useEffect(() => {
    let alive = true;
    const check = () =>
      api.status(shareId).then(
        (status) => {
          if (!alive) return;
          if (was.current || status.isStreaming) reload(); // new output, or the turn's last
          was.current = status.isStreaming;
          setStreaming(status.isStreaming);
        },
        () => undefined, // the transcript's own error shows
      );
    void check();
    const timer = window.setInterval(() => void check(), STATUS_EVERY_MS);
    return () => {
      alive = false;
      window.clearInterval(timer);
    };
  }, [api, shareId, reload]);

  if (error !== undefined)
    return (
      <main className="shared">
        <p role="alert">
          {error instanceof ApiError && error.status === 404
            ? "This link does not exist or was revoked."
            : `Could not load the chat: ${errorMessage(error)}`}
        </p>
      </main>
    );
  if (!data) return <p className="muted">Loading…</p>;
  return (
    <main className="shared" aria-label="Shared chat">
      <header>
        <h1>{data.title}</h1>
        <p className="muted">A shared, read-only chat.{streaming && " The agent is working…"}</p>
      </header>
      <ol className="message-list">
        {(data.messages as unknown as ViewMessage[]).map((message) => (
          <li key={message.id} className={`message message-${message.role}`}>
            <span className="message-role">{message.role === "user" ? "User" : "Assistant"}</span>
            <MessageView message={message} />
          </li>
        ))}
      </ol>
    </main>
  );
}
