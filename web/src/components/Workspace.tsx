import { useCallback, useEffect, useState } from "react";
import { useSessionList } from "../hooks/useSessionList";
import { navigate, parseRoute, sessionPath, usePathname } from "../router";
import { Link } from "./Link";
import { NewSessionDialog } from "./NewSessionDialog";
import { PreferencesDialog } from "./PreferencesDialog";
import { SessionView } from "./SessionView";
import { Sidebar } from "./Sidebar";
import { UsagePage } from "./UsagePage";

const SIDEBAR_REFRESH_MS = 30_000;
/** While a turn runs somewhere, sooner: its Working badge turns into an unread dot when it ends. */
const SIDEBAR_WORKING_REFRESH_MS = 5_000;

interface Props {
  user: string;
  local: boolean;
  onSignOut: () => void;
}

/** The signed-in layout: the sidebar beside the session (one of them at a time on a phone). */
export function Workspace({ user, local, onSignOut }: Props) {
  const pathname = usePathname();
  const route = parseRoute(pathname);
  const usage = pathname === "/usage";
  const [creating, setCreating] = useState(false);
  const [preferences, setPreferences] = useState(false);
  const active = useSessionList("active", true);
  const refresh = active.refresh;
  const sessionsChanged = useCallback(() => void refresh(), [refresh]);
  const [working, setWorking] = useState<string | null>(null); // the session whose turn runs here
  const onWorking = useCallback(
    (sessionId: string, running: boolean) =>
      setWorking((current) => (running ? sessionId : current === sessionId ? null : current)),
    [],
  );
  const busy = working !== null || (active.pages?.sessions.some((s) => s.hasStreaming) ?? false);
  useEffect(() => {
    // other tabs and agents change sessions too: refresh now and then, and on returning
    const timer = setInterval(sessionsChanged, busy ? SIDEBAR_WORKING_REFRESH_MS : SIDEBAR_REFRESH_MS);
    window.addEventListener("focus", sessionsChanged);
    return () => {
      clearInterval(timer);
      window.removeEventListener("focus", sessionsChanged);
    };
  }, [sessionsChanged, busy]);

  return (
    <div className="app" data-view={route.sessionId ? "session" : usage ? "page" : "list"}>
      <a href="#main" className="skip-link">
        Skip to content
      </a>
      <header className="topbar">
        <Link href="/" className="brand">
          Open Agents
        </Link>
        <span className="user" aria-label="Signed in as">
          {user}
        </span>
        <Link href="/usage" className="button-link">
          Usage
        </Link>
        <button type="button" onClick={() => setPreferences(true)}>
          Preferences
        </button>
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <Sidebar
        active={active}
        selectedId={route.sessionId}
        workingId={working}
        onNewSession={() => setCreating(true)}
      />
      <main id="main" className="main" tabIndex={-1}>
        {usage ? (
          <UsagePage />
        ) : route.sessionId ? (
          <SessionView
            key={route.sessionId}
            sessionId={route.sessionId}
            chatId={route.chatId}
            onSessionsChanged={sessionsChanged}
            onWorking={onWorking}
          />
        ) : (
          <div className="empty">
            <h1>Sessions</h1>
            <p>Pick a session, or start a new one.</p>
            <button type="button" className="primary" onClick={() => setCreating(true)}>
              New session
            </button>
          </div>
        )}
      </main>
      {preferences && <PreferencesDialog onClose={() => setPreferences(false)} />}
      {creating && (
        <NewSessionDialog
          local={local}
          onClose={() => setCreating(false)}
          onCreated={(sessionId, chatId) => {
            setCreating(false);
            sessionsChanged();
            navigate(sessionPath(sessionId, chatId));
          }}
        />
      )}
    </div>
  );
}
