import { useCallback, useEffect, useRef, useState } from "react";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";
import { navigate, sessionPath } from "../router";
import { ChatPanel } from "./ChatPanel";
import { ChatTabs } from "./ChatTabs";
import { panelId, tabId } from "./TabList";

interface Props {
  sessionId: string;
  /** The chat in the URL, else the most recently updated one, else the first. */
  chatId: string | null;
  latestChatId: string | null;
  /** An archived session takes no messages. */
  archived?: boolean;
  onRead: () => void;
  onSent: () => void;
  /** A turn this client follows started or ended here (the sidebar's Working badge). */
  onWorking?: (running: boolean) => void;
  /** A tool call of the live turn may have changed the workspace's files. */
  onFilesChanged?: () => void;
  /** Bumped when a ship action may have written a card (or started a turn) in a chat. */
  cardsVersion?: number;
}

export function ChatArea({
  sessionId,
  chatId,
  latestChatId,
  archived = false,
  onRead,
  onSent,
  onWorking,
  onFilesChanged,
  cardsVersion = 0,
}: Props) {
  const api = useApi();
  const load = useCallback(() => api.listChats(sessionId).then((answer) => answer.chats), [api, sessionId]);
  const chats = useLoader(load);
  const [failure, setFailure] = useState<string | null>(null);
  const [working, setWorking] = useState<string | null>(null); // the chat whose turn runs here
  const fetched = chats.data ?? [];
  // the server's isStreaming, or a turn this client follows
  const list = fetched.map((chat) => (chat.id === working ? { ...chat, isStreaming: true } : chat));
  const activeId = [chatId, latestChatId, list[0]?.id].find(
    (id) => id && list.some((chat) => chat.id === id),
  );
  const active = fetched.find((chat) => chat.id === activeId);

  const run = async (action: () => Promise<unknown>) => {
    setFailure(null);
    try {
      await action();
    } catch (error) {
      setFailure(errorMessage(error));
    }
    chats.reload();
  };
  const open = (id: string) => navigate(sessionPath(sessionId, id));
  const reloadChats = chats.reload;
  const read = useCallback(() => {
    reloadChats(); // the tab's unread dot
    onRead();
  }, [reloadChats, onRead]);
  const sent = useCallback(() => {
    reloadChats(); // the first message names the chat
    onSent();
  }, [reloadChats, onSent]);

  const seenCards = useRef(cardsVersion);
  useEffect(() => {
    if (seenCards.current === cardsVersion) return;
    seenCards.current = cardsVersion;
    reloadChats(); // a fix-checks turn runs in one of them now
  }, [cardsVersion, reloadChats]);

  const busy = working !== null;
  useEffect(() => {
    if (!busy) return;
    onWorking?.(true);
    return () => onWorking?.(false); // ended, or the session was left
  }, [busy, onWorking]);

  const markWorking = useCallback(
    (running: boolean) =>
      setWorking((current) => (running ? (activeId ?? null) : current === activeId ? null : current)),
    [activeId],
  );

  if (chats.error !== undefined) return <p role="alert">Could not load chats: {errorMessage(chats.error)}</p>;
  if (!activeId) return <p className="muted">Loading chats…</p>;
  return (
    <section className="chat-area" aria-label="Chats">
      <ChatTabs
        chats={list}
        activeId={activeId}
        archived={archived}
        onSelect={open}
        onCreate={() =>
          run(async () => {
            const { chat } = await api.createChat(sessionId, crypto.randomUUID());
            chats.setData((current = []) => [...current, chat]);
            open(chat.id);
          })
        }
        onRename={(id, title) => run(() => api.renameChat(sessionId, id, title))}
        onDelete={(id) =>
          run(async () => {
            await api.deleteChat(sessionId, id);
            chats.setData((current = []) => current.filter((chat) => chat.id !== id));
            const next = list.find((chat) => chat.id !== id);
            if (next) open(next.id);
          })
        }
      />
      {failure && (
        <p role="alert" className="form-error">
          {failure}
        </p>
      )}
      <div
        role="tabpanel"
        id={panelId("chat")}
        aria-labelledby={tabId("chat", activeId)}
        className="chat-tabpanel"
      >
        <ChatPanel
          key={activeId}
          sessionId={sessionId}
          chatId={activeId}
          modelId={active?.modelId ?? null}
          activeRunId={active?.activeRunId}
          archived={archived}
          onRead={read}
          onSent={sent}
          onTurn={sent}
          onChatChanged={reloadChats}
          onRunning={markWorking}
          onFilesChanged={onFilesChanged}
          version={cardsVersion}
          onForked={(fork) => {
            chats.setData((current = []) => [...current.filter((c) => c.id !== fork.id), fork]);
            open(fork.id);
          }}
        />
      </div>
    </section>
  );
}
