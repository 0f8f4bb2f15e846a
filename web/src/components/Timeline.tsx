import { useCallback, useState } from "react";
import type { AuditEvent } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";

/** "sandbox.hibernated" → "Sandbox hibernated" */
function eventTitle(type: string): string {
  const text = type.replace(/[._]/g, " ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The interesting detail fields in one line: a transition, a generation, a title. */
function eventDetail(detail: Record<string, unknown>): string {
  const parts: string[] = [];
  if (typeof detail.from === "string" && typeof detail.to === "string")
    parts.push(`${detail.from} → ${detail.to}`);
  if (detail.generation !== undefined) parts.push(`generation ${String(detail.generation)}`);
  if (typeof detail.title === "string") parts.push(`“${detail.title}”`);
  if (typeof detail.error === "string") parts.push(detail.error);
  return parts.join(" · ");
}

/** The session's audit log, oldest first, with "Load more" following the cursor. */
export function Timeline({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const load = useCallback(() => api.events(sessionId), [api, sessionId]);
  const first = useLoader(load);
  const [more, setMore] = useState<{ events: AuditEvent[]; nextCursor: string | null } | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  if (first.error !== undefined) return <p role="alert">{errorMessage(first.error)}</p>;
  if (!first.data) return <p className="muted">Loading the activity…</p>;
  const events = [...first.data.events, ...(more?.events ?? [])];
  const cursor = more ? more.nextCursor : first.data.nextCursor;
  const loadMore = async () => {
    try {
      const page = await api.events(sessionId, cursor);
      setMore({ events: [...(more?.events ?? []), ...page.events], nextCursor: page.nextCursor });
    } catch (error) {
      setFailure(errorMessage(error));
    }
  };
  return (
    <>
      <ol className="timeline">
        {events.map((event) => (
          <li key={event.id}>
            <time dateTime={event.at}>{new Date(event.at).toLocaleString()}</time>
            <span className="event-type">{eventTitle(event.type)}</span>
            <span className="muted">{eventDetail(event.detail)}</span>
          </li>
        ))}
      </ol>
      {failure && <p role="alert">{failure}</p>}
      {cursor && (
        <button type="button" onClick={loadMore}>
          Load more
        </button>
      )}
    </>
  );
}
