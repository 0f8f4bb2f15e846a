import { useCallback, useEffect, useRef, useState } from "react";
import type { RespondBody, RunStatus } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { clearCheckpoint, loadCheckpoint, saveCheckpoint } from "./checkpoint";
import { foldRun, withoutMarker, type AgentMessage } from "./stream";

export interface LiveRun {
  runId: string | null;
  /** `starting` until the first page of the run arrives. */
  status: RunStatus | "starting";
  /** The assistant message as folded so far (without the seq marker). */
  message: AgentMessage | null;
  /** The run's error (an `error` chunk), in words. */
  error: string | null;
  /** A poll failed and is being retried. */
  reconnecting: boolean;
}

interface Follow {
  /** The run to follow (from POST /api/chat or /respond); else the chat's latest run. */
  runId?: string;
  /** The message the run continues. */
  base?: AgentMessage;
  /** Continue from the chat's stored checkpoint (a reload): only a live run is followed. */
  resume?: boolean;
}

interface Options {
  /** The run ended (the live state is cleared): its final message, to keep in the list, and its error. */
  onEnd: (message: AgentMessage | null, status: RunStatus, error: string | null) => void;
  /**
   * The chat summary's live run (`activeRunId`): null says there is none, so opening the chat
   * asks the stream endpoint nothing unless a checkpoint is kept; a run id that appears later (a
   * reload of the chat list) is followed. Undefined: unknown, always ask.
   */
  activeRunId?: string | null;
}

const ENDED = new Set<string>(["completed", "failed", "aborted", "waiting"]);
const LONG_POLL_SECONDS = 20;

/**
 * The chat's live agent run: follows its stream (folded by the AI SDK), keeps a checkpoint per
 * chat (the last safe seq and the message there) so a reload continues where it was, and offers
 * stop and respond.
 */
export function useAgentRun(chatId: string, { onEnd, activeRunId }: Options) {
  const api = useApi();
  const [live, setLive] = useState<LiveRun | null>(null);
  const current = useRef<AbortController | null>(null);
  const following = useRef(false); // a follow is under way (it ends by itself)
  const ended = useRef(onEnd);
  useEffect(() => {
    ended.current = onEnd;
  }, [onEnd]);

  const follow = useCallback(
    (what: Follow): Promise<void> => {
      const go = async ({ runId, base, resume = false }: Follow): Promise<void> => {
        current.current?.abort();
        const controller = new AbortController();
        current.current = controller;
        following.current = true;
        const checkpoint = resume ? loadCheckpoint(chatId) : null;
        let expected = runId ?? checkpoint?.runId;
        let status: RunStatus | "starting" = "starting";
        let message: AgentMessage | null = checkpoint?.message ?? base ?? null;
        let failure: string | null = null;
        let ignored = false;
        const update = (patch: Partial<LiveRun>) => {
          if (!controller.signal.aborted && !ignored)
            setLive((previous) => ({
              ...(previous ?? { runId: null, status, message, error: null, reconnecting: false }),
              ...patch,
            }));
        };
        if (!resume) {
          update({ runId: runId ?? null, status, message, error: null, reconnecting: false });
          // this run is the chat's now: a reload before its first safe seq starts it from the top
          if (expected) saveCheckpoint(chatId, { runId: expected, seq: 0, message });
        }
        let polls = 0;
        try {
          await foldRun({
            // the first poll answers at once: a reload while the run is quiet (a command running)
            // learns that it is live without waiting for its next event
            poll: (after, signal) => api.stream(chatId, after, polls++ === 0 ? 0 : LONG_POLL_SECONDS, signal),
            after: checkpoint?.seq ?? 0,
            runId: expected,
            message: message ?? undefined,
            signal: controller.signal,
            onPage: (page) => {
              if (status === "starting" && resume && !checkpoint && ENDED.has(page.status)) {
                ignored = true; // opened on an ended run: the stored messages already show it
                controller.abort();
                return;
              }
              expected = page.runId;
              status = page.status;
              update({ runId: page.runId, status: page.status, reconnecting: false });
            },
            onRetry: () => {
              if (!(resume && status === "starting")) update({ reconnecting: true });
            },
            onMessage: (state, seq) => {
              if (controller.signal.aborted) return; // a newer follow owns the chat's checkpoint
              message = withoutMarker(state);
              update({ message });
              if (seq !== null && expected) saveCheckpoint(chatId, { runId: expected, seq, message: state });
            },
            onError: (error) => {
              failure = errorMessage(error);
              update({ error: failure });
            },
          });
        } catch (error) {
          failure = errorMessage(error);
        }
        if (ignored) {
          if (current.current === controller) following.current = false;
          return;
        }
        if (controller.signal.aborted) return; // a newer follow took over
        following.current = false;
        if (status === "starting" && checkpoint) {
          // the checkpoint's run is no longer the chat's latest: follow whatever runs now
          clearCheckpoint(chatId);
          return go({ resume: true });
        }
        clearCheckpoint(chatId);
        if (status === "starting") {
          setLive(null); // no run (204)
          return;
        }
        const final = ENDED.has(status) ? status : "completed";
        setLive(null);
        ended.current(message, final as RunStatus, failure);
      };
      return go(what);
    },
    [api, chatId],
  );

  useEffect(
    () => () => {
      current.current?.abort();
      following.current = false;
    },
    [follow],
  );
  useEffect(() => {
    // a reload (or opening the chat) continues the chat's live run, if any; a run the chat list
    // shows later (it was stale) is followed then
    if (following.current) return;
    if (activeRunId === null && loadCheckpoint(chatId) === null) return; // no live run to ask for
    void follow({ resume: true });
  }, [follow, chatId, activeRunId]);

  const stop = useCallback(async () => {
    await api.stop(chatId);
  }, [api, chatId]);

  /** Answer an approval or a question; when nothing else waits, follow the run that continues. */
  const respond = useCallback(
    async (body: RespondBody, message: AgentMessage) => {
      const answer = await api.respond(chatId, body);
      if (answer.pending === 0) void follow({ runId: answer.runId, base: message });
      return answer;
    },
    [api, chatId, follow],
  );

  return { live, follow, stop, respond };
}
