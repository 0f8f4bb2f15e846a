import { useCallback, useState } from "react";
import type { DevServer, ListeningPort } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";

/** A preview embeds only on a page of its own site (the app at `localhost`, previews on
 * `*.localhost`): elsewhere (the app at 127.0.0.1) the browser keeps the preview's SameSite
 * cookie out of the frame, so the preview opens in a tab of its own instead. */
export function embeddable(url: string, page: string = window.location.hostname): boolean {
  return new URL(url).hostname.endsWith(`.${page}`);
}

const POLL_MS = 1000;
const POLL_LIMIT = 600; // ten minutes of a slow install

/** A dev server answered `starting` (202: its port did not listen within the request's bound):
 * its status, polled until it runs; an error with its log's tail when it exited first. */
export async function untilRunning(
  read: () => Promise<DevServer>,
  pollMs: number = POLL_MS,
  limit: number = POLL_LIMIT,
): Promise<DevServer> {
  for (let attempt = 0; attempt < limit; attempt++) {
    const current = await read();
    if (current.status === "running") return current;
    if (current.status !== "starting") {
      throw new Error(`The dev server exited before it listened:\n${current.logTail ?? ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  throw new Error("The dev server is still starting: see its log");
}

/** The ports listening in the sandbox, each opened through a private preview link, and the
 * project's dev server (start, stop, the end of its log). */
export function Preview({
  sessionId,
  running,
  pollMs = POLL_MS,
}: {
  sessionId: string;
  running: boolean;
  pollMs?: number;
}) {
  if (!running) return <p className="muted">The sandbox is not running; resume it to preview its servers.</p>;
  return <Ports sessionId={sessionId} pollMs={pollMs} />;
}

function Ports({ sessionId, pollMs }: { sessionId: string; pollMs: number }) {
  const api = useApi();
  const load = useCallback(() => api.ports(sessionId).then((answer) => answer.ports), [api, sessionId]);
  const { data, error, reload } = useLoader(load);
  const loadPublic = useCallback(
    () => api.publicPreviews(sessionId).then((answer) => answer.previews),
    [api, sessionId],
  );
  const publicLinks = useLoader(loadPublic); // a failure here hides no port: none shown public
  const publicUrl = (port: number) => publicLinks.data?.find((p) => p.port === port)?.url;
  const [shown, setShown] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [log, setLog] = useState<string | null>(null);
  const act = async (what: string, action: () => Promise<void>) => {
    setFailure(null);
    setBusy(what);
    try {
      await action();
    } catch (reason) {
      setFailure(errorMessage(reason));
    } finally {
      setBusy(null);
    }
  };
  const open = (port: ListeningPort, inTab: boolean) => {
    // the tab opens now, in the click's gesture; it goes to the link once the link is made
    const tab = inTab ? window.open("about:blank", "_blank") : null;
    return act(`port ${port.port}`, async () => {
      try {
        const { url } = await api.createPreview(sessionId, port.port);
        if (tab) tab.location.href = url;
        else setShown(url);
      } catch (reason) {
        tab?.close();
        throw reason;
      }
    });
  };
  const start = () =>
    act("Starting the dev server…", async () => {
      let started = await api.startDevServer(sessionId);
      if (started.status === "starting") {
        setBusy(`Starting the dev server (${started.command})…`);
        started = await untilRunning(() => api.devServer(sessionId), pollMs);
      }
      const url = started.url ?? (await api.createPreview(sessionId, started.port)).url;
      setShown(url);
      reload();
    });
  const stop = () =>
    act("Stopping the dev server…", async () => {
      await api.stopDevServer(sessionId);
      setShown(null);
      setLog(null);
      reload();
    });
  const editor = () => {
    const tab = window.open("about:blank", "_blank"); // in the click's gesture
    return act("Starting the editor…", async () => {
      try {
        const { url } = await api.startCodeEditor(sessionId);
        if (url && tab) tab.location.href = url;
        reload();
      } catch (reason) {
        tab?.close();
        throw reason;
      }
    });
  };
  const makePublic = (port: number) =>
    act(`public ${port}`, async () => {
      await api.makePreviewPublic(sessionId, port);
      publicLinks.reload();
    });
  const revoke = (port: number) =>
    act(`revoke ${port}`, async () => {
      await api.revokePreview(sessionId, port);
      publicLinks.reload();
    });
  const showLog = () =>
    act("Reading the log…", async () => {
      setLog((await api.devServer(sessionId)).logTail ?? "");
    });
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading…</p>;
  return (
    <div className="preview">
      <div className="preview-actions">
        <button type="button" onClick={() => void start()} disabled={busy !== null}>
          Start dev server
        </button>{" "}
        <button type="button" onClick={() => void stop()} disabled={busy !== null}>
          Stop dev server
        </button>{" "}
        <button type="button" onClick={() => void showLog()} disabled={busy !== null}>
          Log
        </button>{" "}
        <button type="button" onClick={() => void editor()} disabled={busy !== null}>
          Open editor
        </button>{" "}
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      {busy?.endsWith("…") && <p className="muted">{busy}</p>}
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
              {publicUrl(port.port) ? (
                <>
                  {" "}
                  <input
                    readOnly
                    value={publicUrl(port.port)}
                    aria-label={`Public link to ${port.port}`}
                    onFocus={(event) => event.currentTarget.select()}
                  />{" "}
                  <button type="button" onClick={() => void revoke(port.port)} disabled={busy !== null}>
                    Revoke public link to {port.port}
                  </button>
                </>
              ) : (
                <>
                  {" "}
                  <button type="button" onClick={() => void makePublic(port.port)} disabled={busy !== null}>
                    Make {port.port} public
                  </button>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      {failure && (
        <p role="alert" className="preview-failure">
          {failure}
        </p>
      )}
      {log !== null && <pre aria-label="Dev server log">{log || "(empty)"}</pre>}
      {shown && (
        <>
          <p>
            <a href={shown} target="_blank" rel="noreferrer">
              Open in a new tab
            </a>
          </p>
          {embeddable(shown) ? (
            <iframe title="Preview" src={shown} className="preview-frame" />
          ) : (
            <p className="muted">Open the app at localhost to see previews here.</p>
          )}
        </>
      )}
    </div>
  );
}
