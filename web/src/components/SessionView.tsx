import { useCallback, useEffect, useState } from "react";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { ApiError } from "../api/http";
import { useLoader } from "../hooks/useLoader";
import { useSandboxStatus } from "../hooks/useSandboxStatus";
import { deriveChip } from "../lifecycle/status";
import { ChatArea } from "./ChatArea";
import { Countdown } from "./Countdown";
import { Link } from "./Link";
import { SandboxPanel } from "./SandboxPanel";
import { SessionActions } from "./SessionActions";
import { StatusChip } from "./StatusChip";

interface Props {
  sessionId: string;
  chatId: string | null;
  /** Something the sidebar shows changed (state, title, unread, archived). */
  onSessionsChanged: () => void;
}

export function SessionView({ sessionId, chatId, onSessionsChanged }: Props) {
  const api = useApi();
  const load = useCallback(
    () => api.getSession(sessionId).then((answer) => answer.session),
    [api, sessionId],
  );
  const session = useLoader(load);
  const { reading, error: statusError, refresh } = useSandboxStatus(sessionId);
  const [busy, setBusy] = useState<string | null>(null);
  const reloadSession = session.reload;
  const [turns, setTurns] = useState(0); // each turn start and end reloads the sandbox panel
  const resync = useCallback(() => {
    setTurns((n) => n + 1);
    refresh();
    reloadSession();
    onSessionsChanged();
  }, [refresh, reloadSession, onSessionsChanged]);

  const data = session.data;
  const archived = data?.status === "archived";
  const chip = reading ? deriveChip(archived, reading.status, busy === "resume") : null;
  const label = chip?.label ?? null;
  useEffect(() => {
    if (label) onSessionsChanged(); // the sidebar's badge follows the chip
  }, [label, onSessionsChanged]);

  if (session.error !== undefined) {
    const missing = session.error instanceof ApiError && session.error.status === 404;
    return (
      <div className="empty">
        <p role="alert">
          {missing ? "This session does not exist (or is not yours)." : errorMessage(session.error)}
        </p>
        <Link href="/">Back to sessions</Link>
      </div>
    );
  }
  if (!data) return <p className="muted">Loading session…</p>;
  const repo = [data.repoOwner, data.repoName].filter(Boolean).join("/") || data.cloneUrl;
  return (
    <article className="session" aria-labelledby="session-title">
      <header className="session-header">
        <Link href="/" className="back">
          ← Sessions
        </Link>
        <div className="session-heading">
          <h1 id="session-title">{data.title}</h1>
          <p className="session-meta">
            {repo}
            {data.branch && (
              <>
                {" "}
                · <code>{data.branch}</code>
              </>
            )}
          </p>
        </div>
        <div className="session-status">
          {chip ? (
            <StatusChip label={chip.label} detail={chip.detail} live />
          ) : (
            <span className="muted">Checking…</span>
          )}
          {reading && chip?.label === "Active" && <Countdown reading={reading} />}
          {statusError && <span className="form-error">Status unavailable: {statusError}</span>}
        </div>
        <SessionActions
          sessionId={sessionId}
          title={data.title}
          chip={label}
          archived={archived}
          onDone={resync}
          onBusy={setBusy}
        />
      </header>
      <div className="session-body">
        <ChatArea
          sessionId={sessionId}
          chatId={chatId}
          latestChatId={data.latestChatId}
          onRead={onSessionsChanged}
          onSent={resync}
        />
        <SandboxPanel sessionId={sessionId} chip={label} version={turns} />
      </div>
    </article>
  );
}
