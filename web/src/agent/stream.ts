// An agent turn's stream, folded by the AI SDK: the long-poll endpoint's numbered events become a
// ReadableStream of UI message chunks, and `readUIMessageStream` (the `ai` package) turns it into
// the assistant message. Nothing here interprets a chunk beyond its seq and its open/close pairs.
import type { UIMessage as AiUIMessage, UIMessageChunk } from "ai";

export type RunStatus = "running" | "waiting" | "completed" | "failed" | "aborted";

export interface StreamPage {
  runId: string;
  status: RunStatus;
  events: Array<{ seq: number; chunk: Record<string, unknown> }>;
  next: number;
  /** From seq 0 of a run that continues a stored message (after an answer): that message as the
   * run started from it. */
  continues?: AiUIMessage | null;
}

/** One long poll: the events after `after` (null = 204: no run, or nothing more to come). */
export type Poll = (after: number, signal: AbortSignal) => Promise<StreamPage | null>;

export type AgentMessage = AiUIMessage;

/**
 * A data part whose `data` is the seq of the last event folded into the message at a point where
 * no text or reasoning part is open (a safe place to resume from). readUIMessageStream keeps one
 * such part (same type and id) and updates it in place; `withoutMarker` strips it for display.
 */
export const SEQ_MARKER = "data-openagents-seq";

export function withoutMarker(message: AgentMessage): AgentMessage {
  return { ...message, parts: message.parts.filter((part) => part.type !== SEQ_MARKER) };
}

export function markerSeq(message: AgentMessage): number | null {
  const part = message.parts.find((p) => p.type === SEQ_MARKER) as { data?: unknown } | undefined;
  return typeof part?.data === "number" ? part.data : null;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

export interface ChunkStreamOptions {
  poll: Poll;
  /** Continue after this seq (0: from the run's first event). */
  after: number;
  signal: AbortSignal;
  /** Each page's run and status (the stream ends once the run ends and no events are left). */
  onPage?: (page: StreamPage) => void;
  /** A poll failed; it is retried with backoff from the same seq. */
  onRetry?: (error: unknown) => void;
  /** Only events of this run are taken (a later run on the chat ends the stream). */
  runId?: string;
}

const LIVE: ReadonlySet<string> = new Set(["running"]);

/**
 * The run's chunks in seq order from `after`, each once: duplicates and events at or below the
 * last seq taken are dropped, a failed poll is retried from the same seq. Ends when the run has
 * ended and its last event was delivered (or 204), or when `signal` aborts.
 */
export function chunkStream({
  poll,
  after,
  signal,
  onPage,
  onRetry,
  runId,
}: ChunkStreamOptions): ReadableStream<UIMessageChunk> {
  let last = after;
  let failures = 0;
  const open = new Set<string>(); // text / reasoning ids started and not yet ended
  return new ReadableStream<UIMessageChunk>(
    {
      async pull(controller) {
        for (;;) {
          if (signal.aborted) return controller.close();
          let page: StreamPage | null;
          try {
            page = await poll(last, signal);
            failures = 0;
          } catch (error) {
            if (signal.aborted) return controller.close();
            onRetry?.(error);
            failures += 1;
            await sleep(Math.min(10_000, 500 * 2 ** Math.min(failures, 5)), signal);
            continue;
          }
          if (signal.aborted) return controller.close();
          if (page === null) return controller.close();
          if (runId !== undefined && page.runId !== runId) return controller.close();
          runId = page.runId;
          onPage?.(page);
          let delivered = false;
          for (const { seq, chunk } of [...page.events].sort((a, b) => a.seq - b.seq)) {
            if (seq <= last) continue;
            last = seq;
            delivered = true;
            const type = String(chunk.type);
            const id = typeof chunk.id === "string" ? `${type.split("-")[0]}:${chunk.id}` : "";
            if (type === "text-start" || type === "reasoning-start") open.add(id);
            if (type === "text-end" || type === "reasoning-end") open.delete(id);
            controller.enqueue(chunk as UIMessageChunk);
            if (open.size === 0)
              controller.enqueue({ type: SEQ_MARKER, id: "seq", data: seq } as UIMessageChunk);
          }
          if (!LIVE.has(page.status) && !delivered) return controller.close();
          if (delivered) return; // the consumer pulls again
        }
      },
    },
    { highWaterMark: 0 },
  );
}

export interface FoldOptions extends ChunkStreamOptions {
  /**
   * The message the run continues (a stored or checkpointed assistant message), if any; without
   * one, the message the first page says the run continues (from seq 0 after an answer).
   */
  message?: AgentMessage;
  /** Every new state of the message; `seq` is set when the state is exactly the events up to seq. */
  onMessage: (message: AgentMessage, seq: number | null) => void;
  /** An `error` chunk (the run failed) or a malformed chunk. */
  onError?: (error: unknown) => void;
}

/** Fold a run's stream into its assistant message with the AI SDK; resolves when the stream ends. */
export async function foldRun({ message, onMessage, onError, ...options }: FoldOptions): Promise<void> {
  // the AI SDK (and the schemas it brings) loads with the first turn, not with the app
  const { readUIMessageStream } = await import("ai");
  let first: StreamPage | undefined;
  const chunks = chunkStream({
    ...options,
    onPage: (page) => {
      first ??= page;
      options.onPage?.(page);
    },
  }).getReader();
  // the fold starts once the first page has said which message the run continues: its first
  // events (an approved call's output) complete parts of that message
  const head = await chunks.read();
  const base = message ?? first?.continues ?? undefined;
  const stream = new ReadableStream<UIMessageChunk>(
    {
      start(controller) {
        if (head.done) controller.close();
        else controller.enqueue(head.value);
      },
      async pull(controller) {
        const next = await chunks.read();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      cancel: (reason) => chunks.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  let marked = markerSeq(base ?? { id: "", role: "assistant", parts: [] });
  for await (const state of readUIMessageStream<AgentMessage>({ message: base, stream, onError })) {
    // only the state the marker itself produced holds exactly the events up to its seq (later
    // states carry the same marker with more parts)
    const seq = markerSeq(state);
    onMessage(state, seq !== marked ? seq : null);
    marked = seq;
  }
}
