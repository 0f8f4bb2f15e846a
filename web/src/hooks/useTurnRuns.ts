import { useCallback, useMemo } from "react";
import type { Run } from "../api/client";
import { useApi } from "../api/context";
import { useLoader } from "./useLoader";

/** What the chat shows about an assistant message's turn: the run a revert goes back to before
 * (its first run with a checkpoint; an answered approval continues the message in a new run),
 * whether a revert went back to before it, and its runs' estimated cost (when the server priced
 * them; summed over the message's runs). */
export interface Turn {
  revertable: Run | null;
  reverted: boolean;
  costUsd: number | null;
}

/** The session's latest runs (the first page, newest first) by assistant message id. */
export function useTurnRuns(sessionId: string) {
  const api = useApi();
  const load = useCallback(() => api.runs(sessionId).then((page) => page.runs), [api, sessionId]);
  const { data, reload } = useLoader(load);
  const turns = useMemo(() => {
    const found = new Map<string, Turn>();
    for (const run of [...(data ?? [])].reverse()) {
      const turn = found.get(run.assistantMessageId) ?? { revertable: null, reverted: false, costUsd: null };
      if (!turn.revertable && run.checkpoint) turn.revertable = run;
      if (run.revert) turn.reverted = true;
      if (typeof run.costUsd === "number") turn.costUsd = (turn.costUsd ?? 0) + run.costUsd;
      found.set(run.assistantMessageId, turn);
    }
    return found;
  }, [data]);
  return { turns, reload };
}
