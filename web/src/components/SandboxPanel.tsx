import { useState } from "react";
import type { ChipLabel } from "../lifecycle/status";
import { Changes } from "./Changes";
import { FileBrowser } from "./FileBrowser";
import { Preview } from "./Preview";
import { TabList, panelId, tabId } from "./TabList";
import { RunList } from "./agent/RunList";
import { Timeline } from "./Timeline";

type View = "files" | "changes" | "preview" | "activity";
const TABS = [
  { id: "files", label: "Files" },
  { id: "changes", label: "Changes" },
  { id: "preview", label: "Preview" },
  { id: "activity", label: "Activity" },
];

/** Files, git status and diff, and the audit log; reloaded whenever the chip changes. */
export function SandboxPanel({
  sessionId,
  chip,
  version = 0,
  filesVersion = 0,
  hasPr = false,
  hasRepository = true,
  onShipped,
}: {
  sessionId: string;
  chip: ChipLabel | null;
  /** Bumped after each agent turn starts or ends (the Changes and the runs reload). */
  version?: number;
  /** Bumped when the files may have changed: the tree reloads in place. */
  filesVersion?: number;
  /** The session has a pull request: Changes shows its merge readiness. */
  hasPr?: boolean;
  /** False for a session started without a repository: Changes offers to publish it. */
  hasRepository?: boolean;
  /** Something was shipped from the Changes tab (commit, push, PR, merge, fix). */
  onShipped?: () => void;
}) {
  const [view, setView] = useState<View>("files");
  const running = chip === "Active";
  const diff = running ? "live" : chip === "Paused" || chip === "Archived" ? "cached" : "none";
  return (
    <section className="sandbox-panel" aria-labelledby="sandbox-heading">
      <h2 id="sandbox-heading">Sandbox</h2>
      <TabList
        label="Sandbox views"
        prefix="sandbox"
        tabs={TABS}
        selected={view}
        onSelect={(id) => setView(id as View)}
      />
      <div
        role="tabpanel"
        id={panelId("sandbox")}
        aria-labelledby={tabId("sandbox", view)}
        className="sandbox-view"
        key={`${view}-${chip}-${view === "files" ? 0 : version}`}
      >
        {view === "files" && <FileBrowser sessionId={sessionId} chip={chip} version={filesVersion} />}
        {view === "changes" && (
          <Changes
            sessionId={sessionId}
            diff={diff}
            hasPr={hasPr}
            hasRepository={hasRepository}
            onShipped={onShipped}
          />
        )}
        {view === "preview" && <Preview sessionId={sessionId} running={running} />}
        {view === "activity" && (
          <>
            <RunList sessionId={sessionId} />
            <h3>Audit log</h3>
            <Timeline sessionId={sessionId} />
          </>
        )}
      </div>
    </section>
  );
}
