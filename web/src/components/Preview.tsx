import { useCallback, useState } from "react";
import type { ListeningPort } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";

/** The ports listening in the sandbox, each opened through a private preview link. */
export function Preview({ sessionId, running }: { sessionId: string; running: boolean }) {
  if (!running) return <p className="muted">The sandbox is not running; resume it to preview its servers.</p>;
  return <Ports sessionId={sessionId} />;
}

function Ports({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const load = useCallback(() => api.ports(sessionId).then((answer) => answer.ports), [api, sessionId]);
  const { data, error, reload } = useLoader(load);
  const [shown, setShown] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const open = async (port: ListeningPort, inTab: boolean) => {
    setFailure(null);
    // the tab opens now, in the click's gesture; it goes to the link once the link is made
    const tab = inTab ? window.open("about:blank", "_blank") : null;
    try {
      const { url } = await api.createPreview(sessionId, port.port);
      if (tab) tab.location.href = url;
      else setShown(url);
    } catch (reason) {
      tab?.close();
      setFailure(errorMessage(reason));
    }
  };
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading…</p>;
  return (
    <div className="preview">
      <button type="button" onClick={reload}>
        Refresh
      </button>
      {data.length === 0 ? (
        <p className="muted">Nothing listens in the sandbox yet: start a dev server.</p>
      ) : (
        <ul aria-label="Listening ports">
          {data.map((port) => (
            <li key={`${port.port}-${port.address}`}>
              <code>{port.port}</code> {port.command ?? port.address}{" "}
              <button type="button" onClick={() => void open(port, false)}>
                Preview {port.port}
              </button>{" "}
              <button type="button" onClick={() => void open(port, true)}>
                Open {port.port} in a new tab
              </button>
            </li>
          ))}
        </ul>
      )}
      {failure && <p role="alert">{failure}</p>}
      {shown && <iframe title="Preview" src={shown} className="preview-frame" />}
    </div>
  );
}
