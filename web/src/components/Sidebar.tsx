import { useState } from "react";
import type { SessionSummary } from "../api/client";
import { errorMessage } from "../api/errors";
import { useSessionList } from "../hooks/useSessionList";
import { stateBadge } from "../lifecycle/status";
import { sessionPath } from "../router";
import { Link } from "./Link";
import { PrBadge } from "./PrBadge";
import { StatusChip } from "./StatusChip";
import { TabList, panelId, tabId } from "./TabList";
import { UnreadDot } from "./UnreadDot";

type ListTab = "active" | "archived";
type SessionList = ReturnType<typeof useSessionList>;

interface Props {
  active: SessionList;
  selectedId: string | null;
  /** The session whose turn this client follows (Working before the list says so). */
  workingId?: string | null;
  onNewSession: () => void;
}

function repoLabel(session: SessionSummary): string {
  const repo = [session.repoOwner, session.repoName].filter(Boolean).join("/");
  return [repo, session.branch].filter(Boolean).join(" · ");
}

/** A turn runs in the session (or chat). */
export function WorkingBadge() {
  return (
    <span className="working-badge" aria-hidden="true">
      <span className="spinner" /> Working
    </span>
  );
}

function SessionLink({
  session,
  selected,
  working,
}: {
  session: SessionSummary;
  selected: boolean;
  working: boolean;
}) {
  const badge = stateBadge(session.lifecycleState, session.status === "archived");
  // named by its visible text (axe: label-content-name-mismatch), what only shows as a mark
  // (the dot, the spinner) said in hidden words where it shows
  const marks = [working && "working", session.hasUnread && "unread"].filter(Boolean);
  return (
    <li>
      <Link
        href={sessionPath(session.id, session.latestChatId)}
        className="session-link"
        aria-current={selected ? "page" : undefined}
      >
        <span className="session-title">
          {session.hasUnread && <UnreadDot />}
          {session.title}
          <span className="visually-hidden">{marks.map((mark) => `, ${mark}`).join("")},</span>{" "}
          {working && <WorkingBadge />}
        </span>
        <span className="session-meta">
          {repoLabel(session)} <PrBadge number={session.prNumber} status={session.prStatus} />
        </span>
        <span className="visually-hidden">,</span> <StatusChip label={badge} />
      </Link>
    </li>
  );
}

function Listing({
  list,
  selectedId,
  workingId = null,
  empty,
}: {
  list: SessionList;
  selectedId: string | null;
  workingId?: string | null;
  empty: string;
}) {
  const { pages, error, busy, loadMore } = list;
  return (
    <>
      {error !== null && <p role="alert">Could not load sessions: {errorMessage(error)}</p>}
      {pages && pages.sessions.length === 0 && <p className="muted">{empty}</p>}
      <ul className="session-list">
        {pages?.sessions.map((session) => (
          <SessionLink
            key={session.id}
            session={session}
            selected={session.id === selectedId}
            working={session.hasStreaming || session.id === workingId}
          />
        ))}
      </ul>
      {pages?.nextCursor && (
        <button type="button" onClick={loadMore} disabled={busy}>
          {busy ? "Loading…" : "Load more"}
        </button>
      )}
    </>
  );
}

/** Active sessions (newest first, unread dots, state badges) and the archived ones, 50 a page. */
export function Sidebar({ active, selectedId, workingId = null, onNewSession }: Props) {
  const [tab, setTab] = useState<ListTab>("active");
  const archivedCount = active.pages?.archivedCount;
  // archiving or unarchiving changes the count: the archived list then starts again from its top
  const archived = useSessionList("archived", tab === "archived", archivedCount);
  const tabs = [
    { id: "active", label: "Active" },
    {
      id: "archived",
      label: (
        <>
          Archived <span className="count">{archivedCount ?? "…"}</span>
        </>
      ),
    },
  ];
  return (
    <nav className="sidebar" aria-label="Sessions">
      <button type="button" className="primary" onClick={onNewSession}>
        New session
      </button>
      <TabList
        label="Session lists"
        prefix="lists"
        tabs={tabs}
        selected={tab}
        onSelect={(id) => setTab(id as ListTab)}
      />
      <div role="tabpanel" id={panelId("lists")} aria-labelledby={tabId("lists", tab)}>
        {tab === "active" ? (
          <Listing
            list={active}
            selectedId={selectedId}
            workingId={workingId}
            empty="No active sessions yet."
          />
        ) : (
          <Listing list={archived} selectedId={selectedId} empty="Nothing archived." />
        )}
      </div>
    </nav>
  );
}
