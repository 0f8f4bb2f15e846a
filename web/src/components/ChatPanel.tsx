import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "react";
import type { Chat, FilePart, RespondBody, RunStatus, UIMessage } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import type { AgentMessage } from "../agent/stream";
import { useAgentRun } from "../agent/useAgentRun";
import { useMessages } from "../hooks/useMessages";
import { NARROW, useMediaQuery } from "../hooks/useMediaQuery";
import { useTurnRuns } from "../hooks/useTurnRuns";
import { Composer } from "./Composer";
import { ConfirmDialog } from "./ConfirmDialog";
import { ShareButton } from "./ShareButton";
import type { ViewMessage } from "./agent/message";
import { MessageView } from "./agent/MessageView";
import { ModelPicker } from "./agent/ModelPicker";
import { RevertTurn } from "./agent/RevertTurn";

interface Props {
  sessionId: string;
  chatId: string;
  /** The chat's model (null: the default). */
  modelId?: string | null;
  /** The chat summary's live run (null: none; undefined: unknown, the stream is asked). */
  activeRunId?: string | null;
  /** The session is archived: the composer is off until it is unarchived. */
  archived?: boolean;
  /** After the read marker is set (the sidebar's unread dot may go). */
  onRead: () => void;
  /** After a message is stored (the chat title and the sandbox's idle timer may change). */
  onSent: () => void;
  /** A turn started or ended (the Working indicators, the Changes tab, the runs list). */
  onTurn?: () => void;
  /** The chat's settings changed (its model). */
  onChatChanged?: () => void;
  /** A turn started or stopped running in this client (the tab's Working badge). */
  onRunning?: (running: boolean) => void;
  /** A fork of this chat was created (open it). */
  onForked?: (chat: Chat) => void;
  /** A write, edit or bash call of the live turn returned (the files may have changed). */
  onFilesChanged?: () => void;
  /** Bumped when the chat may hold new messages written elsewhere (a commit, push or PR card). */
  version?: number;
}

/** Tools whose result may change the workspace's files. */
const WRITES = new Set(["tool-write", "tool-edit", "tool-bash"]);

/** How many of a message's write, edit and bash calls have their (final) result. */
export function fileResults(
  message:
    { parts: ReadonlyArray<{ type: string; state?: string; preliminary?: boolean }> } | null | undefined,
): number {
  if (!message) return 0;
  return message.parts.filter(
    (part) => WRITES.has(part.type) && part.state === "output-available" && !part.preliminary,
  ).length;
}

const NEAR_TOP = 48; // px: scrolling this close to the top loads the page above
const FOLLOW = 160; // px: a reader this close to the bottom follows the stream

function newId(): string {
  return crypto.randomUUID();
}

/** The message with a call answered locally (the server records the same). */
function answered(message: ViewMessage, body: RespondBody): ViewMessage {
  return {
    ...message,
    parts: message.parts.map((part) => {
      if (part.toolCallId !== body.toolCallId) return part;
      if (body.answers !== undefined)
        return { ...part, state: "output-available", output: { answers: body.answers } };
      const approval = {
        ...(part.approval as object),
        approved: body.approved ?? false,
        reason: body.reason ?? undefined,
      };
      return { ...part, state: body.approved ? "approval-responded" : "output-denied", approval };
    }),
  };
}

/** A call the run waits on the user for: an approval, or a question not answered yet. */
function waitsForUser(part: ViewMessage["parts"][number]): boolean {
  if (part.state === "approval-requested") return true;
  return part.type === "tool-ask_user_question" && part.state === "input-available";
}

const ENDED_NOTICE: Partial<Record<RunStatus, string>> = {
  aborted: "Stopped.",
  failed: "The turn failed.",
  waiting: "Waiting for your answer.",
};

/** One chat: its messages (the live turn streamed in), the model picker and the composer. */
export function ChatPanel({
  sessionId,
  chatId,
  modelId = null,
  activeRunId,
  archived = false,
  onRead,
  onSent,
  onTurn,
  onChatChanged,
  onRunning,
  onForked,
  onFilesChanged,
  version = 0,
}: Props) {
  const api = useApi();
  const { messages, hasOlder, loadingOlder, olderError, error, loading, append, reload, loadOlder } =
    useMessages(sessionId, chatId);
  const [notice, setNotice] = useState<{ text: string; error: string | null } | null>(null);
  const { turns, reload: reloadTurns } = useTurnRuns(sessionId);
  const [deleting, setDeleting] = useState<string | null>(null); // the message to delete from
  const [failure, setFailure] = useState<string | null>(null);
  const [ended, setEnded] = useState(0); // turns ended here (a hidden tab leaves them unread)
  const turn = useRef(onTurn);
  useEffect(() => {
    turn.current = onTurn;
  }, [onTurn]);
  const onEnd = useCallback(
    (message: AgentMessage | null, status: RunStatus, failure: string | null) => {
      if (message) append(message as UIMessage);
      reload(); // the stored message carries the usage
      reloadTurns(); // the turn's checkpoint (it can be reverted now) and cost
      setEnded((n) => n + 1);
      turn.current?.();
      const text = ENDED_NOTICE[status];
      setNotice(text || failure ? { text: text ?? "The turn failed.", error: failure } : null);
    },
    [append, reload, reloadTurns],
  );
  const { live, follow, stop, respond } = useAgentRun(chatId, { onEnd, activeRunId });

  const running = live !== null && (live.status === "running" || live.status === "starting");
  const seenVersion = useRef(version);
  useEffect(() => {
    if (seenVersion.current === version) return;
    seenVersion.current = version;
    reload(); // the cards a ship action wrote (a turn it started comes as the chat's activeRunId)
  }, [version, reload]);
  const results = fileResults(live?.message as ViewMessage | undefined);
  const filesChanged = useRef(onFilesChanged);
  useEffect(() => {
    filesChanged.current = onFilesChanged;
  }, [onFilesChanged]);
  useEffect(() => {
    if (results > 0) filesChanged.current?.(); // one more write, edit or bash result
  }, [results]);
  useEffect(() => {
    onRunning?.(running);
  }, [onRunning, running]);
  const scroller = useRef<HTMLDivElement>(null);
  // what scrolls the messages: their own box, or on a phone (the box grows) the page itself
  const narrow = useMediaQuery(NARROW);
  const scrolling = useCallback(
    (): HTMLElement | null => (narrow ? (document.scrollingElement as HTMLElement | null) : scroller.current),
    [narrow],
  );
  const fromBottom = useRef<number | null>(null);
  const last = messages[messages.length - 1]?.id;
  const liveSize = live?.message ? JSON.stringify(live.message.parts).length : 0;

  useEffect(() => {
    let alive = true;
    api.markRead(sessionId, chatId).then(
      () => alive && onRead(),
      () => undefined, // the dot stays; nothing else depends on it
    );
    return () => {
      alive = false;
    };
  }, [api, sessionId, chatId, onRead]);

  // a turn that ends while the chat is on screen is read; one that ends in a hidden tab stays
  // unread (the sidebar's dot) until the tab is seen again
  const unseen = useRef(false);
  useEffect(() => {
    if (ended === 0) return;
    unseen.current = true;
    const seen = () => {
      if (document.visibilityState === "hidden" || !unseen.current) return;
      unseen.current = false;
      api.markRead(sessionId, chatId).then(onRead, () => undefined);
    };
    seen();
    document.addEventListener("visibilitychange", seen);
    return () => document.removeEventListener("visibilitychange", seen);
  }, [api, sessionId, chatId, onRead, ended]);

  useLayoutEffect(() => {
    const box = scrolling();
    if (!box) return;
    // showing earlier messages keeps the view where it was; a new last message scrolls to it
    box.scrollTop = fromBottom.current === null ? box.scrollHeight : box.scrollHeight - fromBottom.current;
    fromBottom.current = null;
  }, [last, messages.length, live?.message?.id, scrolling]);

  useLayoutEffect(() => {
    // the streamed message grows: follow it while the reader is at the bottom
    const box = scrolling();
    if (box && box.scrollHeight - box.scrollTop - box.clientHeight < FOLLOW) box.scrollTop = box.scrollHeight;
  }, [liveSize, scrolling]);

  const earlier = () => {
    if (!hasOlder || loadingOlder) return;
    const box = scrolling();
    if (box) fromBottom.current = box.scrollHeight - box.scrollTop;
    void loadOlder();
  };
  const scrolled = () => {
    if ((scroller.current?.scrollTop ?? NEAR_TOP) < NEAR_TOP) earlier();
  };

  const act = async (action: () => Promise<unknown>) => {
    setFailure(null);
    try {
      await action();
    } catch (problem) {
      setFailure(errorMessage(problem));
    }
  };
  const deleteFrom = (messageId: string) =>
    act(async () => {
      setDeleting(null);
      await api.deleteFrom(sessionId, chatId, messageId);
      reload();
      onSent(); // the chat's unread state may change
    });
  const fork = (messageId: string) =>
    act(async () => {
      const { chat } = await api.forkChat(sessionId, chatId, messageId);
      onForked?.(chat);
    });

  const send = async (text: string, files: FilePart[] = []) => {
    const parts: UIMessage["parts"] = [...(text ? [{ type: "text", text }] : []), ...files];
    const message: UIMessage = { id: newId(), role: "user", parts };
    const { runId } = await api.startTurn(sessionId, chatId, message);
    append(message);
    setNotice(null);
    void follow({ runId });
    onSent();
    turn.current?.();
  };

  // the stored messages with the live one streamed over its stored copy (or after them)
  const shown: ViewMessage[] = (messages as ViewMessage[]).filter((m) => m.id !== live?.message?.id);
  if (live?.message) shown.push(live.message as ViewMessage);
  const lastAssistant = [...shown].reverse().find((m) => m.role === "assistant");
  const canRespond = !running && lastAssistant !== undefined && shown[shown.length - 1] === lastAssistant;
  // read from the message, not from the turn's end: a remount or a reload keeps saying it
  const awaitsAnswer = canRespond && lastAssistant.parts.some(waitsForUser);
  const shownNotice = awaitsAnswer ? { text: ENDED_NOTICE.waiting ?? "", error: null } : notice;
  useLayoutEffect(() => {
    // a notice under the last message (waiting, stopped, failed) is scrolled to like the message
    const box = scrolling();
    if (box && shownNotice && box.scrollHeight - box.scrollTop - box.clientHeight < FOLLOW)
      box.scrollTop = box.scrollHeight;
  }, [shownNotice?.text]); // eslint-disable-line react-hooks/exhaustive-deps

  const answer = async (message: ViewMessage, body: RespondBody) => {
    const next = answered(message, body);
    const result = await respond(body, next as AgentMessage);
    append(next as UIMessage);
    if (result.pending === 0) setNotice(null);
  };

  return (
    <div className="chat-panel">
      <div className="messages" ref={scroller} role="log" aria-label="Messages" onScroll={scrolled}>
        {hasOlder && (
          <button type="button" className="earlier" onClick={earlier} disabled={loadingOlder}>
            {loadingOlder ? "Loading earlier messages…" : "Load earlier messages"}
          </button>
        )}
        {olderError !== undefined && (
          <p role="alert">Could not load earlier messages: {errorMessage(olderError)}</p>
        )}
        {failure && (
          <p role="alert" className="form-error">
            {failure}
          </p>
        )}
        {loading && <p className="muted">Loading messages…</p>}
        {error !== undefined && <p role="alert">Could not load messages: {errorMessage(error)}</p>}
        {!loading && shown.length === 0 && <p className="muted">No messages yet.</p>}
        <ol className="message-list">
          {shown.map((message) => {
            const streaming = live?.message?.id === message.id && running;
            return (
              <li
                key={message.id}
                className={`message message-${message.role}`}
                aria-busy={streaming || undefined}
              >
                <span className="message-role">{message.role === "user" ? "You" : "Assistant"}</span>
                <MessageView
                  message={message}
                  sessionId={sessionId}
                  live={streaming}
                  costUsd={turns.get(message.id)?.costUsd}
                  onRespond={
                    canRespond && message === lastAssistant ? (body) => answer(message, body) : undefined
                  }
                />
                {message.role === "assistant" && !streaming && !archived && (
                  <RevertTurn
                    sessionId={sessionId}
                    run={turns.get(message.id)?.revertable ?? null}
                    reverted={turns.get(message.id)?.reverted ?? false}
                    disabled={running}
                    onReverted={() => {
                      reloadTurns();
                      turn.current?.(); // the Changes tab and the runs list follow the files
                    }}
                  />
                )}
                {!running && !archived && live?.message?.id !== message.id && (
                  <div className="message-actions">
                    {message.role === "user" ? (
                      <button type="button" className="link" onClick={() => setDeleting(message.id)}>
                        Delete from here
                      </button>
                    ) : (
                      <button type="button" className="link" onClick={() => void fork(message.id)}>
                        Fork
                      </button>
                    )}
                  </div>
                )}
              </li>
            );
          })}
        </ol>
        {running && (
          <p className="working" role="status">
            <span className="spinner" aria-hidden="true" />{" "}
            {live?.reconnecting ? "Reconnecting…" : live?.status === "starting" ? "Starting…" : "Working…"}
          </p>
        )}
        {!running && shownNotice && (
          <div
            className={shownNotice.error ? "run-notice run-failed" : "run-notice"}
            role={shownNotice.error ? "alert" : "status"}
          >
            {shownNotice.text}
            {shownNotice.error && <pre className="run-error">{shownNotice.error}</pre>}
          </div>
        )}
      </div>
      <div className="chat-footer">
        <ModelPicker
          sessionId={sessionId}
          chatId={chatId}
          modelId={modelId}
          onChanged={() => onChatChanged?.()}
        />
        <ShareButton sessionId={sessionId} chatId={chatId} />
        <Composer
          onSend={send}
          onUpload={(file) => api.uploadAttachment(sessionId, file)}
          running={running}
          onStop={stop}
          disabledReason={archived ? "Unarchive to continue." : null}
          loadSkills={() => api.skills(sessionId).then((answer) => answer.skills)}
        />
      </div>
      {deleting && (
        <ConfirmDialog
          title="Delete messages"
          message="Delete this message and every message after it? This cannot be undone."
          confirmLabel="Delete from here"
          onConfirm={() => void deleteFrom(deleting)}
          onCancel={() => setDeleting(null)}
        />
      )}
    </div>
  );
}
