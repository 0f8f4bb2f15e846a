import { useCallback, useState } from "react";
import type { UIMessage } from "../api/client";
import { useApi } from "../api/context";
import { useLoader } from "./useLoader";

export const WINDOW = 50;

/**
 * A chat's messages, oldest first. The API pages forward from the oldest message (`nextCursor`),
 * so the pages are followed to the newest, and the view shows the latest WINDOW messages with
 * earlier ones revealed WINDOW at a time (`showEarlier`).
 */
export function useMessages(sessionId: string, chatId: string) {
  const api = useApi();
  const load = useCallback(async () => {
    const messages: UIMessage[] = [];
    let cursor: string | null = null;
    do {
      const page = await api.messages(sessionId, chatId, cursor);
      messages.push(...(page.messages as UIMessage[]));
      cursor = page.nextCursor;
    } while (cursor);
    return messages;
  }, [api, sessionId, chatId]);
  const { data, error, loading, setData, reload } = useLoader(load);
  const [shown, setShown] = useState(WINDOW);
  const all = data ?? [];
  const hidden = Math.max(0, all.length - shown);
  const append = useCallback(
    (message: UIMessage) =>
      setData((messages = []) => [...messages.filter((m) => m.id !== message.id), message]),
    [setData],
  );
  return {
    messages: all.slice(hidden),
    hidden,
    error,
    loading,
    append,
    reload,
    showEarlier: () => setShown((count) => count + WINDOW),
  };
}
