import { useState } from "react";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";

interface Props {
  sessionId: string;
  asked: boolean;
  disabled: boolean;
  /** The setting was saved (reload the session). */
  onChanged: () => void;
}

/** The session's "ask before running" mode: every bash command and subagent task waits for
 * the user's approval (docs/agent.md, Approvals). */
export function AskBeforeBash({ sessionId, asked, disabled, onChanged }: Props) {
  const api = useApi();
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const change = async (value: boolean) => {
    setSaving(true);
    setError(null);
    try {
      await api.setAskBeforeBash(sessionId, value);
      onChanged();
    } catch (failure) {
      setError(errorMessage(failure));
    } finally {
      setSaving(false);
    }
  };
  return (
    <span className="ask-before-bash">
      <label>
        <input
          type="checkbox"
          checked={asked}
          disabled={disabled || saving}
          onChange={(event) => void change(event.target.checked)}
        />{" "}
        Ask before running commands
      </label>
      {error && <span className="form-error">{error}</span>}
    </span>
  );
}
