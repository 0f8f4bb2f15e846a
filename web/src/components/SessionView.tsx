import { useCallback, useEffect, useState } from "react";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { ApiError } from "../api/http";
import { useLoader } from "../hooks/useLoader";
import { NARROW, useMediaQuery } from "../hooks/useMediaQuery";
import { useSandboxStatus } from "../hooks/useSandboxStatus";
import { deriveChip, failureInWords, withPending, type Pending } from "../lifecycle/status";
import { AskBeforeBash } from "./AskBeforeBash";
import { ChatArea } from "./ChatArea";
import { Countdown } from "./Countdown";
import { checksSummary } from "./GitPanel";
import { Link } from "./Link";
import { PrBadge } from "./PrBadge";
import { SandboxPanel } from "./SandboxPanel";
import { SessionActions, type Action } from "./SessionActions";
import { StatusChip } from "./StatusChip";
import { TabList, panelId, tabId } from "./TabList";

type Pane = "chat" | "sandbox";
/** How long a Pause the server accepted may still read active before the chip says so. */
const PAUSE_PATIENCE_MS = 30_000;
const PANES = [
  { id: "chat", label: "Chat" },
  { id: "sandbox", label: "Sandbox" },
];

/** The open pull request's checks in words (from merge readiness; null until known or none). */
function usePrChecks(sessionId: string, prNumber: number | null, prStatus: string | null, version: number) {
  const api = useApi();
  const open = prNumber !== null && prStatus === "open";
  const load = useCallback(
    () => (open ? api.mergeReadiness(sessionId).then((r) => checksSummary(r.checks)) : Promise.resolve(null)),
    [api, sessionId, open, version], // eslint-disable-line react-hooks/exhaustive-deps
  );
  return useLoader(load).data ?? null;
}

interface Props {
  sessionId: string;
  chatId: string | null;
  /** Something the sidebar shows changed (state, title, unread, archived). */
  onSessionsChanged: () => void;
  /** A turn this client follows runs in the session, or no longer does. */
  onWorking?: (sessionId: string, running: boolean) => void;
}

export function SessionView({ sessionId, chatId, onSessionsChanged, onWorking }: Props) {
  const api = useApi();
  const load = useCallback(
    () => api.getSession(sessionId).then((answer) => answer.session),
    [api, sessionId],
  );
  const session = useLoader(load);
  const [busy, setBusy] = useState<string | null>(null);
  // a Pause the server took but has not shown yet (its status says active for a few seconds)
  const [pausedAt, setPausedAt] = useState<number | null>(null);
  const pausing = pausedAt !== null;
  const { reading, error: statusError, refresh } = useSandboxStatus(sessionId, pausing);
  const narrow = useMediaQuery(NARROW); // a phone: the chat and the sandbox are two tabs
  const [pane, setPane] = useState<Pane>("chat");
  const [unarchived, setUnarchived] = useState(false); // provisions from the bundle: "Restoring"
  const reloadSession = session.reload;
  const [turns, setTurns] = useState(0); // each turn start and end reloads the sandbox panel
  const [files, setFiles] = useState(0); // and a tool's write, edit or bash result the Files tree
  const filesChanged = useCallback(() => setFiles((n) => n + 1), []);
  const resync = useCallback(() => {
    setTurns((n) => n + 1);
    setFiles((n) => n + 1);
    refresh();
    reloadSession();
    onSessionsChanged();
  }, [refresh, reloadSession, onSessionsChanged]);
  const [cards, setCards] = useState(0); // a ship action wrote a card into a chat
  const shipped = useCallback(() => {
    setCards((n) => n + 1);
    refresh();
    reloadSession(); // the PR badge
    onSessionsChanged();
  }, [refresh, reloadSession, onSessionsChanged]);
  const working = useCallback((running: boolean) => onWorking?.(sessionId, running), [onWorking, sessionId]);
  const actionDone = useCallback(
    (action: Action, ok: boolean) => {
      if (action === "unarchive" && ok) setUnarchived(true);
      setPausedAt(action === "pause" && ok ? Date.now() : null);
      resync();
    },
    [resync],
  );

  const data = session.data;
  const checks = usePrChecks(sessionId, data?.prNumber ?? null, data?.prStatus ?? null, cards);
  const archived = data?.status === "archived";
  const state = reading?.status.lifecycle.state;
  // the restore from the archive lasts while the server provisions
  const restoring = unarchived && !archived && (state === "provisioning" || state === "archived");
  // the server shows it now (Hibernating, then Paused), or it never did in time: say what is
  const settled = state !== undefined && state !== "active";
  const late = pausedAt !== null && reading !== null && reading.receivedAt - pausedAt > PAUSE_PATIENCE_MS;
  if (pausedAt !== null && (settled || late)) setPausedAt(null); // (a render-time update)
  const pending: Pending =
    busy === "pause" || pausing ? "pause" : busy === "unarchive" || restoring ? "unarchive" : null;
  const derived = reading ? deriveChip(archived, reading.status, busy === "resume") : null;
  const chip = derived ? withPending(derived, pending) : null; // what the user sees

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
            )}{" "}
            <PrBadge number={data.prNumber} status={data.prStatus} checks={checks} />
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
          chip={pausing ? "Hibernating" : (derived?.label ?? null)}
          archived={archived}
          onDone={actionDone}
          onBusy={setBusy}
        />
        <AskBeforeBash
          sessionId={sessionId}
          asked={data.askBeforeBash}
          disabled={archived}
          onChanged={reloadSession}
        />
      </header>
      {chip?.label === "Failed" && (
        <div className="session-failure" role="alert">
          {failureInWords(chip.detail)} <span className="muted">Retry sandbox sets it up again.</span>
        </div>
      )}
      {narrow && (
        <TabList
          label="Session views"
          prefix="pane"
          tabs={PANES}
          selected={pane}
          onSelect={(id) => setPane(id as Pane)}
        />
      )}
      <div
        className="session-body"
        data-pane={narrow ? pane : undefined}
        {...(narrow ? { role: "tabpanel", id: panelId("pane"), "aria-labelledby": tabId("pane", pane) } : {})}
      >
        {/* on a phone the hidden pane stays mounted: a turn keeps streaming behind the Sandbox tab */}
        <ChatArea
          sessionId={sessionId}
          chatId={chatId}
          latestChatId={data.latestChatId}
          archived={archived}
          onRead={onSessionsChanged}
          onSent={resync}
          onWorking={working}
          onFilesChanged={filesChanged}
          cardsVersion={cards}
        />
        <SandboxPanel
          sessionId={sessionId}
          chip={label}
          version={turns}
          filesVersion={files}
          hasPr={data.prNumber !== null && data.prNumber !== undefined}
          hasRepository={Boolean(data.cloneUrl || data.repoName)}
          onShipped={shipped}
        />
      </div>
    </article>
  );
}
