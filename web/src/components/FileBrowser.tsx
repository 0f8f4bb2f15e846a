import { useCallback, useState } from "react";
import type { FileEntry } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";

const NOT_RUNNING = "Files can be browsed while the sandbox is running (resume a paused one).";

function sortEntries(entries: FileEntry[]): FileEntry[] {
  return [...entries].sort(
    (a, b) => Number(b.type === "dir") - Number(a.type === "dir") || a.path.localeCompare(b.path),
  );
}

const baseName = (path: string) => path.split("/").pop() ?? path;

function Directory({
  sessionId,
  path,
  selected,
  onOpen,
}: {
  sessionId: string;
  path: string;
  selected: string | null;
  onOpen: (path: string) => void;
}) {
  const api = useApi();
  const load = useCallback(
    () => api.files(sessionId, path).then((answer) => sortEntries(answer.entries)),
    [api, sessionId, path],
  );
  const { data, error } = useLoader(load);
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading…</p>;
  return (
    <ul className="tree">
      {data.map((entry) =>
        entry.type === "dir" ? (
          <Folder
            key={entry.path}
            sessionId={sessionId}
            path={entry.path}
            selected={selected}
            onOpen={onOpen}
          />
        ) : (
          <li key={entry.path}>
            <button
              type="button"
              className="tree-file"
              aria-current={entry.path === selected ? "true" : undefined}
              onClick={() => onOpen(entry.path)}
            >
              {baseName(entry.path)}
            </button>
          </li>
        ),
      )}
    </ul>
  );
}

function Folder(props: {
  sessionId: string;
  path: string;
  selected: string | null;
  onOpen: (path: string) => void;
}) {
  const [open, setOpen] = useState(false);
  return (
    <li>
      <button type="button" className="tree-dir" aria-expanded={open} onClick={() => setOpen(!open)}>
        {baseName(props.path)}/
      </button>
      {open && <Directory {...props} />}
    </li>
  );
}

function Viewer({ sessionId, path }: { sessionId: string; path: string }) {
  const api = useApi();
  const load = useCallback(() => api.fileContent(sessionId, path), [api, sessionId, path]);
  const { data, error } = useLoader(load);
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading {path}…</p>;
  return (
    <figure className="viewer">
      <figcaption>
        <code>{data.path}</code> · {data.size} bytes{data.truncated && " (truncated)"}
      </figcaption>
      {data.encoding === "base64" ? (
        <p className="muted">Binary file, not shown.</p>
      ) : (
        <pre tabIndex={0} aria-label={`Contents of ${data.path}`}>
          {data.content}
        </pre>
      )}
    </figure>
  );
}

/** The workspace tree (folders load as they open) and the selected file. */
export function FileBrowser({ sessionId, running }: { sessionId: string; running: boolean }) {
  const [selected, setSelected] = useState<string | null>(null);
  if (!running) return <p className="muted">{NOT_RUNNING}</p>;
  return (
    <div className="files">
      <nav aria-label="Workspace files" className="file-tree">
        <Directory sessionId={sessionId} path="." selected={selected} onOpen={setSelected} />
      </nav>
      {selected && <Viewer sessionId={sessionId} path={selected} />}
    </div>
  );
}
