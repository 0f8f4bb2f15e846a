import { useCallback, useState, type FormEvent } from "react";
import type { Preferences } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { ApiError } from "../api/http";
import { useLoader } from "../hooks/useLoader";
import { Modal } from "./Modal";

/** "Server default" in the model list: the preference is null (the server picks). */
const SERVER_DEFAULT = "";

interface Props {
  onClose: () => void;
}

/** The user's defaults for new sessions and chats (GET / PUT /api/user/preferences). */
export function PreferencesDialog({ onClose }: Props) {
  const api = useApi();
  const load = useCallback(() => Promise.all([api.preferences(), api.models()]), [api]);
  const loaded = useLoader(load);
  const [edited, setForm] = useState<Preferences | null>(null);
  const [saving, setSaving] = useState(false);
  const [failure, setFailure] = useState<{ message: string; field: string | null } | null>(null);
  const form = edited ?? loaded.data?.[0] ?? null; // the stored preferences until edited

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!form) return;
    setSaving(true);
    setFailure(null);
    try {
      await api.setPreferences({ ...form, autoCreatePr: form.autoCommitPush && form.autoCreatePr });
      onClose();
    } catch (error) {
      setFailure({
        message: errorMessage(error),
        field: error instanceof ApiError ? error.field : null,
      });
    } finally {
      setSaving(false);
    }
  };

  const models = loaded.data?.[1].models ?? [];
  const model = form?.defaultModelId ?? SERVER_DEFAULT;
  const unknownModel = model !== SERVER_DEFAULT && !models.some((m) => m.id === model);
  const modelError = failure?.field === "defaultModelId" ? failure.message : null;
  return (
    <Modal title="Preferences" onClose={onClose}>
      {loaded.error !== undefined && (
        <p role="alert">Could not load the preferences: {errorMessage(loaded.error)}</p>
      )}
      {loaded.error === undefined && !form && <p className="muted">Loading…</p>}
      {form && (
        <form className="form" onSubmit={submit} noValidate>
          <p className="hint">Defaults for the sessions and chats you create from now on.</p>
          <label htmlFor="pref-model">Default model</label>
          <select
            id="pref-model"
            value={model}
            onChange={(event) => setForm({ ...form, defaultModelId: event.target.value || null })}
            aria-invalid={modelError ? true : undefined}
            aria-describedby={modelError ? "pref-model-error" : undefined}
          >
            <option value={SERVER_DEFAULT}>Server default</option>
            {unknownModel && <option value={model}>{model} (not configured)</option>}
            {models.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
              </option>
            ))}
          </select>
          {modelError && (
            <p id="pref-model-error" className="field-error" role="alert">
              {modelError}
            </p>
          )}
          <label className="inline">
            <input
              type="checkbox"
              checked={form.autoCommitPush}
              onChange={(event) => setForm({ ...form, autoCommitPush: event.target.checked })}
            />
            Auto-commit and push after each turn
          </label>
          <label className="inline">
            <input
              type="checkbox"
              checked={form.autoCommitPush && form.autoCreatePr}
              disabled={!form.autoCommitPush}
              onChange={(event) => setForm({ ...form, autoCreatePr: event.target.checked })}
            />
            Auto-create a pull request (needs auto-commit)
          </label>
          {failure && !modelError && (
            <p role="alert" className="form-error">
              Not saved: {failure.message}
            </p>
          )}
          <div className="dialog-actions">
            <button type="button" onClick={onClose}>
              Cancel
            </button>
            <button type="submit" className="primary" disabled={saving}>
              {saving ? "Saving…" : "Save"}
            </button>
          </div>
        </form>
      )}
    </Modal>
  );
}
