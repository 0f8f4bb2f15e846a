// Client routes: `/`, `/sessions/:id[/chats/:chatId]` and the public `/shared/:shareId`, on
// the History API.
import { useSyncExternalStore } from "react";

interface Route {
  sessionId: string | null;
  chatId: string | null;
}

export function parseRoute(pathname: string): Route {
  const match = /^\/sessions\/([^/]+)(?:\/chats\/([^/]+))?\/?$/.exec(pathname);
  return {
    sessionId: match?.[1] ? decodeURIComponent(match[1]) : null,
    chatId: match?.[2] ? decodeURIComponent(match[2]) : null,
  };
}

/** The share id of a `/shared/:shareId` page (public: no sign-in), else null. */
export function sharedId(pathname: string): string | null {
  const match = /^\/shared\/([^/]+)\/?$/.exec(pathname);
  return match?.[1] ? decodeURIComponent(match[1]) : null;
}

export function sessionPath(sessionId: string, chatId?: string | null): string {
  const base = `/sessions/${encodeURIComponent(sessionId)}`;
  return chatId ? `${base}/chats/${encodeURIComponent(chatId)}` : base;
}

const listeners = new Set<() => void>();

export function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  listeners.forEach((listener) => listener());
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener("popstate", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("popstate", listener);
  };
}

export function usePathname(): string {
  return useSyncExternalStore(subscribe, () => window.location.pathname);
}
