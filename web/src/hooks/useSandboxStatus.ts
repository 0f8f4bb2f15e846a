import { useCallback, useEffect, useState } from "react";
import type { SandboxStatus } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { FAST_POLL_MS, POLL_MS, nextPollDelay } from "../lifecycle/status";

export interface StatusReading {
  status: SandboxStatus;
  /** Date.now() when it arrived: the countdown runs on the server's clock from there. */
  receivedAt: number;
}

/** Polls `/api/sandbox/status` (see nextPollDelay; every 2 s while `fast`, an action of this
 * client settling); `refresh` re-syncs at once, after an action. */
export function useSandboxStatus(sessionId: string, fast = false) {
  const api = useApi();
  const [reading, setReading] = useState<(StatusReading & { sessionId: string }) | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      let delay = POLL_MS;
      try {
        const status = await api.sandboxStatus(sessionId);
        if (!live) return;
        setReading({ sessionId, status, receivedAt: Date.now() });
        setError(null);
        delay = fast ? FAST_POLL_MS : nextPollDelay(status); // fast: an action settles
      } catch (failure) {
        if (!live) return;
        setError(errorMessage(failure));
      }
      timer = setTimeout(poll, delay);
    };
    void poll();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [api, sessionId, round, fast]);
  const current = reading?.sessionId === sessionId ? reading : null;
  const refresh = useCallback(() => setRound((r) => r + 1), []);
  return { reading: current, error, refresh };
}
