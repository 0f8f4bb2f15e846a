import { useCallback, useEffect, useState } from "react";
import { ARCHIVED_PAGE_SIZE, type ListFilter, type SessionSummary } from "../api/client";
import { useApi } from "../api/context";

interface Pages {
  sessions: SessionSummary[];
  nextCursor: string | null;
  archivedCount: number;
}

function merge(older: SessionSummary[], page: SessionSummary[]): SessionSummary[] {
  const seen = new Set(older.map((session) => session.id));
  return [...older, ...page.filter((session) => !seen.has(session.id))];
}

/**
 * One sidebar list (newest first): loaded when `enabled` and again from the top whenever
 * `resetKey` changes; `refresh` reloads the first page, `loadMore` follows `nextCursor`
 * (archived pages are 50 long).
 */
export function useSessionList(filter: ListFilter, enabled: boolean, resetKey?: unknown) {
  const api = useApi();
  const [pages, setPages] = useState<Pages | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const request = useCallback(
    (cursor: string | null) =>
      api.listSessions(filter, cursor, filter === "archived" ? ARCHIVED_PAGE_SIZE : undefined).then(
        (page) => {
          setPages((previous) => ({
            sessions: cursor && previous ? merge(previous.sessions, page.sessions) : page.sessions,
            nextCursor: page.nextCursor,
            archivedCount: page.archivedCount,
          }));
          setError(null);
        },
        (failure: unknown) => setError(failure),
      ),
    [api, filter],
  );
  const refresh = useCallback(() => request(null), [request]);
  useEffect(() => {
    if (enabled) void request(null);
  }, [enabled, request, resetKey]);
  const loadMore = () => {
    if (!pages?.nextCursor) return;
    setBusy(true);
    void request(pages.nextCursor).finally(() => setBusy(false));
  };
  return { pages, error, busy, refresh, loadMore };
}
