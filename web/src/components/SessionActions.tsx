import { useState } from "react";
import type { Api } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import type { ChipLabel } from "../lifecycle/status";
import { ConfirmDialog } from "./ConfirmDialog";

export type Action = "resume" | "pause" | "retry" | "archive" | "unarchive";

const RUN: Record<Action, (api: Api, id: string) => Promise<unknown>> = {
  resume: (api, id) => api.resume(id),
  pause: (api, id) => api.pause(id),
  retry: (api, id) => api.retryProvisioning(id),
  archive: (api, id) => api.setSessionStatus(id, "archived"),
  unarchive: (api, id) => api.setSessionStatus(id, "running"),
};

const LABEL: Record<Action, [idle: string, busy: string]> = {
  resume: ["Resume", "Resuming…"],
  pause: ["Pause", "Hibernating…"],
  retry: ["Retry sandbox", "Retrying…"],
  archive: ["Archive", "Archiving…"],
  unarchive: ["Unarchive", "Unarchiving…"],
};

/** What a finished action did, said beside the buttons while the chip shows that state. */
const DONE: Partial<Record<Action, [text: string, shownWhile: ChipLabel]>> = {
  retry: ["Retry started: the sandbox is being set up again.", "Provisioning"],
};

/** The buttons a state offers: Resume when paused, Pause when active, Retry when failed. */
export function actionsFor(label: ChipLabel | null, archived: boolean): Action[] {
  if (archived) return ["unarchive"];
  const sandbox: Partial<Record<ChipLabel, Action>> = { Paused: "resume", Active: "pause", Failed: "retry" };
  const first = label ? sandbox[label] : undefined;
  return first ? [first, "archive"] : ["archive"];
}

interface Props {
  sessionId: string;
  title: string;
  chip: ChipLabel | null;
  archived: boolean;
  /** The state changed on the server: re-sync the chip, the session and the sidebar. */
  onDone: (action: Action, ok: boolean) => void;
  onBusy: (action: Action | null) => void;
}

export function SessionActions({ sessionId, title, chip, archived, onDone, onBusy }: Props) {
  const api = useApi();
  const [busy, setBusy] = useState<Action | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const [done, setDone] = useState<[text: string, shownWhile: ChipLabel] | null>(null);
  const run = async (action: Action) => {
    setBusy(action);
    onBusy(action);
    setFailure(null);
    setDone(null);
    let ok = false;
    try {
      await RUN[action](api, sessionId);
      ok = true;
      setDone(DONE[action] ?? null);
    } catch (error) {
      setFailure(`${LABEL[action][0]} failed: ${errorMessage(error)}`);
    } finally {
      setBusy(null);
      onBusy(null);
      onDone(action, ok);
    }
  };
  return (
    <div className="toolbar session-actions">
      {actionsFor(chip, archived).map((action) => (
        <button
          key={action}
          type="button"
          className={action === "archive" ? "danger-outline" : undefined}
          disabled={busy !== null}
          onClick={() => (action === "archive" ? setConfirming(true) : void run(action))}
        >
          {busy === action ? LABEL[action][1] : LABEL[action][0]}
        </button>
      ))}
      {failure && (
        <p role="alert" className="form-error">
          {failure}
        </p>
      )}
      {done && done[1] === chip && (
        <p role="status" className="action-done">
          {done[0]}
        </p>
      )}
      {confirming && (
        <ConfirmDialog
          title="Archive session"
          message={`Archive “${title}”? Its sandbox is stopped; the session moves to the Archived list and can be unarchived.`}
          confirmLabel="Archive"
          onCancel={() => setConfirming(false)}
          onConfirm={() => {
            setConfirming(false);
            void run("archive");
          }}
        />
      )}
    </div>
  );
}
