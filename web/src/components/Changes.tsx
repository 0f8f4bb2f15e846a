import { useCallback } from "react";
import type { Diff, GitStatus } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { ApiError } from "../api/http";
import { useLoader } from "../hooks/useLoader";
import { UnifiedDiff } from "./UnifiedDiff";

function GitSummary({ status }: { status: GitStatus }) {
  return (
    <section aria-labelledby="git-heading">
      <h3 id="git-heading">Git status</h3>
      <dl className="facts">
        <dt>Branch</dt>
        <dd>
          <code>{status.branch ?? "(detached HEAD)"}</code>
        </dd>
        <dt>Ahead / behind</dt>
        <dd>
          {status.ahead} / {status.behind}
        </dd>
        <dt>Staged, unstaged, untracked</dt>
        <dd>
          {status.stagedCount}, {status.unstagedCount}, {status.untrackedCount}
        </dd>
      </dl>
      {status.uncommittedFiles.length > 0 && (
        <ul className="plain">
          {status.uncommittedFiles.map((file) => (
            <li key={file.path}>
              <code>{file.status}</code> {file.path}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function DiffFiles({ diff, cachedAt }: { diff: Diff; cachedAt?: string }) {
  return (
    <section aria-labelledby="diff-heading">
      <h3 id="diff-heading">
        Diff <span className="added">+{diff.totalAdditions}</span>{" "}
        <span className="removed">−{diff.totalDeletions}</span>
      </h3>
      {cachedAt && (
        <p className="muted">Cached at {new Date(cachedAt).toLocaleString()} (the sandbox is not running).</p>
      )}
      {diff.files.length === 0 && (
        <p className="muted">
          No changes against {diff.base ? <code>{diff.base.slice(0, 12)}</code> : "the base"}.
        </p>
      )}
      {diff.files.map((file) => (
        <details key={file.path} className="diff-file">
          <summary>
            {file.path} <span className="muted">({file.status})</span>{" "}
            <span className="added">+{file.additions}</span>{" "}
            <span className="removed">−{file.deletions}</span>
          </summary>
          {file.diff && <UnifiedDiff diff={file.diff} label={`Diff of ${file.path}`} />}
        </details>
      ))}
    </section>
  );
}

function Live({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const load = useCallback(
    () => Promise.all([api.gitStatus(sessionId), api.diff(sessionId)]),
    [api, sessionId],
  );
  const { data, error } = useLoader(load);
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading changes…</p>;
  return (
    <>
      <GitSummary status={data[0]} />
      <DiffFiles diff={data[1]} />
    </>
  );
}

function Cached({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const load = useCallback(() => api.cachedDiff(sessionId), [api, sessionId]);
  const { data, error } = useLoader(load);
  if (error instanceof ApiError && error.status === 404)
    return <p className="muted">No cached diff for this session.</p>;
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading the cached diff…</p>;
  return <DiffFiles diff={data.data} cachedAt={data.cachedAt} />;
}

/** Git status and the live diff while the sandbox runs; the cached diff when paused or archived. */
export function Changes({ sessionId, diff }: { sessionId: string; diff: "live" | "cached" | "none" }) {
  if (diff === "live") return <Live sessionId={sessionId} />;
  if (diff === "cached") return <Cached sessionId={sessionId} />;
  return <p className="muted">No changes to show until the sandbox is running.</p>;
}
