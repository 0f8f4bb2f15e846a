import { useCallback, useEffect, useRef, useState } from "react";
import type { FileEntry } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";
import type { ChipLabel } from "../lifecycle/status";

const baseName = (path: string) => path.split("/").pop() ?? path;

/** Why there are no files to browse, for each state but Active. */
export const NO_FILES: Record<Exclude<ChipLabel, "Active">, string> = {
  Provisioning: "The sandbox is being set up; its files show here when it is ready.",
  Restoring: "The sandbox is being restored; its files show here when it is back.",
  Hibernating: "The sandbox is hibernating; resume it to browse its files.",
  Paused: "The sandbox is paused; resume it to browse its files.",
  Failed: "The sandbox failed, so there are no files to show; Retry sandbox sets it up again.",
  Archived: "The session is archived; unarchive it to browse its files.",
  "No sandbox": "This session has no sandbox, so there are no files to show.",
};

/** The entries shown: folders first, then by path; git's own folder is not part of the work. */
function sortEntries(entries: FileEntry[]): FileEntry[] {
  return entries
    .filter((entry) => baseName(entry.path) !== ".git")
    .sort((a, b) => Number(b.type === "dir") - Number(a.type === "dir") || a.path.localeCompare(b.path));
}

/** Loads again (keeping what it shows, and the folders open) each time `version` moves. */
function useReloadOn(version: number, reload: () => void) {
  const seen = useRef(version);
  useEffect(() => {
    if (version === seen.current) return;
    seen.current = version;
    reload();
  }, [version, reload]);
}

interface DirectoryProps {
  sessionId: string;
  path: string;
  selected: string | null;
  onOpen: (path: string) => void;
  /** Bumped when the files may have changed (a turn ended, a write, edit or bash result). */
  version: number;
}

function Directory({ sessionId, path, selected, onOpen, version }: DirectoryProps) {
  const api = useApi();
  const load = useCallback(
    () => api.files(sessionId, path).then((answer) => sortEntries(answer.entries)),
    [api, sessionId, path],
  );
  const { data, error, reload } = useLoader(load);
  useReloadOn(version, reload);
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
            version={version}
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

function Folder(props: DirectoryProps) {
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

function Viewer({ sessionId, path, version }: { sessionId: string; path: string; version: number }) {
  const api = useApi();
  const load = useCallback(() => api.fileContent(sessionId, path), [api, sessionId, path]);
  const { data, error, reload } = useLoader(load);
  useReloadOn(version, reload);
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

/** The workspace tree (folders load as they open) and the selected file; both load again when
 * `version` moves (a turn ended, a tool wrote), keeping the folders open and the file selected. */
export function FileBrowser({
  sessionId,
  chip,
  version = 0,
}: {
  sessionId: string;
  chip: ChipLabel | null;
  version?: number;
}) {
  const [selected, setSelected] = useState<string | null>(null);
  if (chip === null) return <p className="muted">Checking the sandbox…</p>;
  if (chip !== "Active") return <p className="muted">{NO_FILES[chip]}</p>;
  return (
    <div className="files">
      <nav aria-label="Workspace files" className="file-tree">
        <Directory
          sessionId={sessionId}
          path="."
          selected={selected}
          onOpen={setSelected}
          version={version}
        />
      </nav>
      {selected && <Viewer sessionId={sessionId} path={selected} version={version} />}
    </div>
  );
}
