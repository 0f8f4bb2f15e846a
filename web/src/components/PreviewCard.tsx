import { useState } from "react";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";

/** The chat's card for a server the agent started (a detached `bash` whose result names the
 * ports that began listening). "Open preview" asks for a private link when clicked — never a
 * link stored in the transcript — and opens it in a tab made in the click's gesture. Without a
 * session (a shared chat) it only says which ports listened. */
export function PreviewCard({ sessionId, ports }: { sessionId?: string; ports: number[] }) {
  if (!sessionId)
    return (
      <section className="preview-card" aria-label="Server preview">
        {ports.map((port) => (
          <p key={port} className="preview-card-port">
            A server listened on port <code>{port}</code>.
          </p>
        ))}
      </section>
    );
  return <Openable sessionId={sessionId} ports={ports} />;
}

function Openable({ sessionId, ports }: { sessionId: string; ports: number[] }) {
  const api = useApi();
  const [busy, setBusy] = useState<number | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const open = async (port: number) => {
    setFailure(null);
    setBusy(port);
    // the tab opens now, in the click's gesture; it goes to the link once the link is made
    const tab = window.open("about:blank", "_blank");
    if (tab) tab.opener = null;
    try {
      const { url } = await api.createPreview(sessionId, port);
      if (tab) tab.location.href = url;
      else window.location.assign(url);
    } catch (reason) {
      tab?.close();
      setFailure(errorMessage(reason));
    } finally {
      setBusy(null);
    }
  };
  return (
    <section className="preview-card" aria-label="Server preview">
      {ports.map((port) => (
        <p key={port} className="preview-card-port">
          <span>
            A server listens on port <code>{port}</code>.
          </span>{" "}
          <button
            type="button"
            onClick={() => void open(port)}
            disabled={busy !== null}
            aria-label={`Open preview of port ${port}`}
          >
            {busy === port ? "Opening…" : "Open preview"}
          </button>
        </p>
      ))}
      {failure && (
        <p className="tool-error" role="alert">
          {failure}
        </p>
      )}
    </section>
  );
}

/** The ports a detached `bash` result names (the sandbox's word: numbers in range only). */
export function startedPorts(input: unknown, output: unknown): number[] {
  const detached =
    typeof input === "object" && input !== null && (input as Record<string, unknown>).detached === true;
  const said =
    typeof output === "object" && output !== null ? (output as Record<string, unknown>).ports : null;
  if (!detached || !Array.isArray(said)) return [];
  return said.filter((p): p is number => Number.isInteger(p) && p > 0 && p < 65536).slice(0, 8);
}
