import { useCallback, useId, useState } from "react";
import { useApi } from "../../api/context";
import { errorMessage } from "../../api/errors";
import { useLoader } from "../../hooks/useLoader";

interface Props {
  sessionId: string;
  chatId: string;
  /** The chat's model (may be one that is no longer configured). */
  modelId: string | null;
  /** After the chat's model changed. */
  onChanged: () => void;
}

/** The chat's model: the configured models (GET /api/models); "no model configured" said plainly. */
export function ModelPicker({ sessionId, chatId, modelId, onChanged }: Props) {
  const api = useApi();
  const id = useId();
  const load = useCallback(() => api.models(), [api]);
  const models = useLoader(load);
  const [failure, setFailure] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  if (models.error !== undefined)
    return <p className="muted model-picker">Models unavailable: {errorMessage(models.error)}</p>;
  if (!models.data) return null;
  const { models: list, defaultModelId, message } = models.data;
  if (list.length === 0)
    return (
      <p role="status" className="model-missing">
        <strong>No model is configured.</strong> {message ?? "Set OPENAGENTS_MODELS on the server."}
      </p>
    );
  const known = modelId !== null && list.some((model) => model.id === modelId);
  const value = known ? modelId : (defaultModelId ?? list[0]!.id);
  const change = async (next: string) => {
    setSaving(true);
    setFailure(null);
    try {
      await api.setChatModel(sessionId, chatId, next);
      onChanged();
    } catch (error) {
      setFailure(errorMessage(error));
    } finally {
      setSaving(false);
    }
  };
  return (
    <div className="model-picker">
      <label htmlFor={id}>Model</label>
      <select id={id} value={value} disabled={saving} onChange={(event) => void change(event.target.value)}>
        {list.map((model) => (
          <option key={model.id} value={model.id}>
            {model.id}
          </option>
        ))}
      </select>
      {modelId !== null && !known && (
        <span className="muted" title={`${modelId} is not configured on this server`}>
          ({modelId} unavailable: {value} is used)
        </span>
      )}
      {failure && (
        <span role="alert" className="form-error">
          {failure}
        </span>
      )}
    </div>
  );
}
