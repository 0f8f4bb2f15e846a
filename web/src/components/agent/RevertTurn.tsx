import { useState } from "react";
import type { RevertAnswer, Run } from "../../api/client";
import { useApi } from "../../api/context";
import { errorMessage } from "../../api/errors";
import { Modal } from "../Modal";

interface Props {
  sessionId: string;
  /** The run whose checkpoint a revert goes back to (null: nothing to revert to). */
  run: Run | null;
  /** A revert already went back to before this turn. */
  reverted: boolean;
  /** A turn runs: no revert now (the server would answer 409). */
  disabled?: boolean;
  onReverted: () => void;
}

function Paths({ label, paths }: { label: string; paths: string[] }) {
  if (paths.length === 0) return null;
  return (
    <>
      <h3>{label}</h3>
      <ul className="revert-paths">
        {paths.map((path) => (
          <li key={path}>
            <code>{path}</code>
          </li>
        ))}
      </ul>
    </>
  );
}

/** "Revert to before this turn" on an assistant turn: a dry run lists the files it will touch in
 * a confirm dialog; confirming reverts. Once reverted, the marker shows where. */
export function RevertTurn({ sessionId, run, reverted, disabled = false, onReverted }: Props) {
  const api = useApi();
  const [preview, setPreview] = useState<RevertAnswer | null>(null);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  if (!run && !reverted) return null;

  const attempt = async (action: () => Promise<void>) => {
    setBusy(true);
    setFailure(null);
    try {
      await action();
    } catch (error) {
      setFailure(errorMessage(error));
    } finally {
      setBusy(false);
    }
  };
  const ask = (target: Run) =>
    attempt(async () => setPreview(await api.revertRun(sessionId, target.runId, true)));
  const confirm = (target: Run) =>
    attempt(async () => {
      await api.revertRun(sessionId, target.runId, false);
      setPreview(null);
      onReverted();
    });
  const nothing = preview && preview.restored.length === 0 && preview.removed.length === 0;

  return (
    <div className="revert-turn">
      {reverted && (
        <p className="revert-marker" role="status">
          Reverted to before this turn
        </p>
      )}
      {run && (
        <button type="button" className="revert-button" disabled={disabled || busy} onClick={() => ask(run)}>
          Revert to before this turn
        </button>
      )}
      {failure && (
        <p role="alert" className="form-error">
          {failure}
        </p>
      )}
      {run && preview && (
        <Modal
          title="Revert to before this turn?"
          onClose={() => setPreview(null)}
          initialFocus="[data-cancel]"
        >
          <p>
            {nothing
              ? "The files are as they were before this turn; reverting puts the branch back too."
              : "The workspace goes back to how it was before this turn, with every later turn's changes undone. The current state is saved first."}
          </p>
          <Paths label="Restored" paths={preview.restored} />
          <Paths label="Removed" paths={preview.removed} />
          <div className="dialog-actions">
            <button type="button" data-cancel onClick={() => setPreview(null)}>
              Cancel
            </button>
            <button type="button" className="danger" disabled={busy} onClick={() => confirm(run)}>
              Revert
            </button>
          </div>
        </Modal>
      )}
    </div>
  );
}
