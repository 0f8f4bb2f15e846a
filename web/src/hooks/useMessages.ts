import { useCallback, useRef, useState } from "react";
import { END, MESSAGE_PAGE_SIZE, type UIMessage } from "../api/client";
import { useApi } from "../api/context";
import { useLoader } from "./useLoader";

const MAX_PAGE = 500; // the server's largest page

interface Loaded {
  messages: UIMessage[];
  /** The `before` of the page above the oldest loaded message; null at the chat's start. */
  older: string | null;
}

/**
 * A chat's messages, oldest first. The chat opens on its newest page (`before=end`) and
 * `loadOlder` pages up (the reader scrolls to the top). `reload` fetches the newest messages
 * again, as many as are loaded, so a deletion or a finished turn shows.
 */
export function useMessages(sessionId: string, chatId: string) {
  const api = useApi();
  const size = useRef(MESSAGE_PAGE_SIZE); // how many a reload fetches: the ones loaded
  const load = useCallback(async (): Promise<Loaded> => {
    const page = await api.messages(sessionId, chatId, END, Math.min(size.current, MAX_PAGE));
    return { messages: page.messages as UIMessage[], older: page.nextCursor };
  }, [api, sessionId, chatId]);
  const { data, error, loading, setData, reload } = useLoader(load);
  const [paging, setPaging] = useState<{ failure: unknown } | "loading" | null>(null);
  const older = data?.older ?? null;
  const loadOlder = useCallback(async () => {
    if (!older || paging === "loading") return;
    setPaging("loading");
    try {
      const page = await api.messages(sessionId, chatId, older);
      setData((current = { messages: [], older: null }) => ({
        messages: [...(page.messages as UIMessage[]), ...current.messages],
        older: page.nextCursor,
      }));
      size.current += page.messages.length;
      setPaging(null);
    } catch (failure) {
      setPaging({ failure });
    }
  }, [api, sessionId, chatId, older, paging, setData]);
  const append = useCallback(
    (message: UIMessage) =>
      setData((current = { messages: [], older: null }) => ({
        ...current,
        messages: [...current.messages.filter((m) => m.id !== message.id), message],
      })),
    [setData],
  );
  return {
    messages: data?.messages ?? [],
    /** More messages lie above the loaded ones. */
    hasOlder: older !== null,
    loadingOlder: paging === "loading",
    olderError: paging !== null && paging !== "loading" ? paging.failure : undefined,
    error,
    loading,
    append,
    reload,
    loadOlder,
  };
}
