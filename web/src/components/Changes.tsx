import { useCallback } from "react";
import type { Diff, GitStatus } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { ApiError } from "../api/http";
import { useLoader } from "../hooks/useLoader";
import { MergePanel, PublishRepository, ShipActions } from "./GitPanel";
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

function Live({ sessionId, onShipped }: { sessionId: string; onShipped: () => void }) {
  const api = useApi();
  const load = useCallback(
    () => Promise.all([api.gitStatus(sessionId), api.diff(sessionId)]),
    [api, sessionId],
  );
  const { data, error, reload } = useLoader(load);
  const shipped = useCallback(() => {
    reload();
    onShipped();
  }, [reload, onShipped]);
  if (error !== undefined) return <p role="alert">{errorMessage(error)}</p>;
  if (!data) return <p className="muted">Loading changes…</p>;
  return (
    <>
      <ShipActions sessionId={sessionId} dirty={data[0].hasUncommittedChanges} onShipped={shipped} />
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

const nothing = () => undefined;

/** Git status, the live diff and the ship buttons while the sandbox runs (and Publish to a
 * repository when the session has none); the cached diff when paused or archived; the pull
 * request's merge readiness whenever the session has one. */
export function Changes({
  sessionId,
  diff,
  hasPr = false,
  hasRepository = true,
  onShipped = nothing,
}: {
  sessionId: string;
  diff: "live" | "cached" | "none";
  hasPr?: boolean;
  /** False for a session started without a repository: the panel offers to publish it. */
  hasRepository?: boolean;
  /** A commit, discard, push, pull request, merge or fix started: what shows it reloads. */
  onShipped?: () => void;
}) {
  return (
    <>
      {hasPr && <MergePanel sessionId={sessionId} onShipped={onShipped} />}
      {!hasRepository && diff === "live" && (
        <PublishRepository sessionId={sessionId} onPublished={onShipped} />
      )}
      {diff === "live" && <Live sessionId={sessionId} onShipped={onShipped} />}
      {diff === "cached" && <Cached sessionId={sessionId} />}
      {diff === "none" && <p className="muted">No changes to show until the sandbox is running.</p>}
    </>
  );
}
