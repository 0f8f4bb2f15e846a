import { useCallback, useState } from "react";
import type { Run } from "../../api/client";
import { useApi } from "../../api/context";
import { errorMessage } from "../../api/errors";
import { useLoader } from "../../hooks/useLoader";
import { formatCost } from "./MessageView";

const STATUS: Record<string, string> = {
  running: "Working",
  waiting: "Waiting for you",
  completed: "Completed",
  aborted: "Stopped",
  failed: "Failed",
};

function duration(run: Run): string {
  if (!run.finishedAt) return "";
  const seconds = Math.max(0, (Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / 1000);
  return seconds < 60
    ? `${seconds.toFixed(1)} s`
    : `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

function usage(run: Run): string {
  const u = run.usage;
  const parts = [
    `${run.steps} steps`,
    `${u.inputTokens.toLocaleString("en")} in`,
    `${u.outputTokens.toLocaleString("en")} out`,
  ];
  if (u.cacheReadTokens) parts.push(`${u.cacheReadTokens.toLocaleString("en")} cached`);
  if (typeof run.costUsd === "number") parts.push(`est. ${formatCost(run.costUsd)}`);
  return parts.join(" · ");
}

/** The session's agent runs, newest first (GET /api/sessions/{id}/runs), with "Load more". */
export function RunList({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const load = useCallback(() => api.runs(sessionId), [api, sessionId]);
  const first = useLoader(load);
  const [more, setMore] = useState<{ runs: Run[]; nextCursor: string | null } | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  if (first.error !== undefined)
    return <p role="alert">Could not load the runs: {errorMessage(first.error)}</p>;
  if (!first.data) return <p className="muted">Loading the runs…</p>;
  const runs = [...first.data.runs, ...(more?.runs ?? [])];
  const cursor = more ? more.nextCursor : first.data.nextCursor;
  const loadMore = async () => {
    try {
      const page = await api.runs(sessionId, cursor);
      setMore({ runs: [...(more?.runs ?? []), ...page.runs], nextCursor: page.nextCursor });
    } catch (error) {
      setFailure(errorMessage(error));
    }
  };
  return (
    <section aria-labelledby="runs-heading">
      <h3 id="runs-heading">Agent runs</h3>
      {runs.length === 0 && <p className="muted">No agent runs yet.</p>}
      <ol className="timeline runs">
        {runs.map((run) => (
          <li key={run.runId}>
            <time dateTime={run.startedAt}>{new Date(run.startedAt).toLocaleString()}</time>
            <span className="event-type">
              {STATUS[run.status] ?? run.status}
              {duration(run) && <span className="muted"> in {duration(run)}</span>}
            </span>
            <span className="muted">
              {run.modelId} · {usage(run)}
            </span>
            {run.error && <span className="run-failed">{run.error}</span>}
          </li>
        ))}
      </ol>
      {failure && <p role="alert">{failure}</p>}
      {cursor && (
        <button type="button" onClick={loadMore}>
          Load more runs
        </button>
      )}
    </section>
  );
}
